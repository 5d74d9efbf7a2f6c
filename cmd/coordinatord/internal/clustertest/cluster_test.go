package clustertest

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordinatord/coordinatord/client"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// Timeouts of the tests, generous for a loaded two-core machine. An election takes 1–2 s
// (cluster.DefaultTiming).
const (
	readyTimeout  = 90 * time.Second // a node's /readyz after a (re)start
	leaderTimeout = 30 * time.Second // every partition led, and the nodes agree on it
)

// clusterOptions describe a test cluster.
type clusterOptions struct {
	nodes       int
	partitions  int // state partitions; 8 unless set
	replication int // share.coordinator.state.topic.replication.factor; the default (3) unless set
	// debugLog runs the servers with --log-level debug, which logs each change of a state
	// partition's role on a node ("state partition role").
	debugLog bool
	// hosts are the nodes' IP addresses, by index (node id - 1); distinct loopback addresses
	// unless set.
	hosts []string
	// netns are the nodes' network namespaces, by index; none unless set.
	netns []string
	// dataDirs override nodes' data directories, by index ("": a directory of the test's).
	dataDirs []string
}

// cluster is a test cluster of coordinatord processes.
type cluster struct {
	t     *testing.T
	opts  clusterOptions
	nodes []*node // by index: node id - 1
}

// newCluster prepares the nodes of a cluster (started by start).
func newCluster(t *testing.T, opts clusterOptions) *cluster {
	t.Helper()
	if opts.partitions == 0 {
		opts.partitions = 8
	}
	if opts.hosts == nil {
		opts.hosts = loopbackHosts(opts.nodes)
	}
	c := &cluster{t: t, opts: opts}
	var initial []string
	for i := range opts.nodes {
		initial = append(initial, fmt.Sprintf("%d=%s", i+1, joinPort(opts.hosts[i], raftPort)))
	}
	base := t.TempDir()
	for i := range opts.nodes {
		n := &node{t: t, id: i + 1, host: opts.hosts[i], dataDir: filepath.Join(base, "node"+strconv.Itoa(i+1))}
		if i < len(opts.netns) {
			n.netns = opts.netns[i]
		}
		if i < len(opts.dataDirs) && opts.dataDirs[i] != "" {
			n.dataDir = opts.dataDirs[i]
		}
		n.args = []string{
			"--node-id", strconv.Itoa(n.id),
			"--listen", n.grpcAddr(), "--metrics-listen", n.metricsAddr(), "--raft-listen", n.raftAddr(),
			"--initial-cluster", strings.Join(initial, ","),
			"--data-dir", n.dataDir,
			"--override", "share.coordinator.state.topic.num.partitions=" + strconv.Itoa(opts.partitions),
		}
		if opts.replication > 0 {
			n.args = append(n.args, "--override", "share.coordinator.state.topic.replication.factor="+strconv.Itoa(opts.replication))
		}
		if opts.debugLog {
			n.args = append(n.args, "--log-level", "debug")
		}
		c.nodes = append(c.nodes, n)
		t.Cleanup(n.cleanup)
	}
	t.Cleanup(c.saveLogsOnFailure)
	return c
}

func joinPort(host, port string) string { return host + ":" + port }

// loopbackHosts returns n loopback addresses 127.A.B.1 to 127.A.B.n, with A and B drawn at
// random so that another test cluster, or a leftover one, on this machine is not in the way.
func loopbackHosts(n int) []string {
	a, b := 100+rand.IntN(100), rand.IntN(256)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.%d.%d.%d", a, b, i+1)
	}
	return out
}

// start starts every node, waits until each is ready and every partition is led by its
// preferred node.
func (c *cluster) start() {
	c.t.Helper()
	for _, n := range c.nodes {
		n.start()
	}
	for _, n := range c.nodes {
		n.waitReady(readyTimeout)
	}
	c.waitBalanced()
}

// waitBalanced waits until every partition is led by its preferred node and returns the
// leaderships. Until then the nodes move leaderships to their preferred nodes (a planned
// transfer every few seconds, internal/cluster/balance.go), which a test's fault would race
// with. Partition p's preferred leader is the (p mod n)-th node in id order
// (internal/cluster/placement.go).
func (c *cluster) waitBalanced() leadership {
	c.t.Helper()
	deadline := time.Now().Add(leaderTimeout)
	for {
		l := c.waitLeaders(c.nodes, leaderTimeout)
		off := 0
		for p, id := range l.leader {
			if id != p%len(c.nodes)+1 {
				off++
			}
		}
		if off == 0 {
			return l
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d partitions are not led by their preferred nodes after %v: %v", off, leaderTimeout, l.leader)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// node returns the node with id.
func (c *cluster) node(id int) *node { return c.nodes[id-1] }

// others returns the nodes other than those with the ids except.
func (c *cluster) others(except ...int) []*node {
	var out []*node
	for _, n := range c.nodes {
		if !slices.Contains(except, n.id) {
			out = append(out, n)
		}
	}
	return out
}

// grpcAddrs are the gRPC addresses of every node.
func (c *cluster) grpcAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.grpcAddr())
	}
	return out
}

// leadership is what a scrape of some nodes says of every partition's leader.
type leadership struct {
	leader map[int]int      // partition → the node that reports leading it
	term   map[int]float64  // partition → that leader's term
	views  map[int][]string // partition → disagreements, for the failure message
}

// observeLeaders scrapes nodes and returns the partitions whose leadership they agree on: one of
// them reports leading the partition, and every one of them holding a replica names it leader.
func (c *cluster) observeLeaders(nodes []*node) (leadership, error) {
	l := leadership{leader: map[int]int{}, term: map[int]float64{}, views: map[int][]string{}}
	named := map[int]map[int]bool{} // partition → the leader ids the nodes name
	for _, n := range nodes {
		m, err := n.scrape()
		if err != nil {
			return l, err
		}
		for p, v := range m["sharecoord_raft_leader_node"] {
			if named[p] == nil {
				named[p] = map[int]bool{}
			}
			named[p][int(v)] = true
			l.views[p] = append(l.views[p], fmt.Sprintf("node %d names %d", n.id, int(v)))
		}
		for p, v := range m["sharecoord_raft_leader"] {
			if v != 1 {
				continue
			}
			if prev, ok := l.leader[p]; ok && prev != n.id {
				l.leader[p] = -1 // two nodes report leading it
				continue
			}
			l.leader[p], l.term[p] = n.id, m["sharecoord_raft_term"][p]
		}
	}
	for p, id := range l.leader {
		if id <= 0 || len(named[p]) != 1 || !named[p][id] {
			delete(l.leader, p)
		}
	}
	return l, nil
}

// waitLeaders waits until the nodes agree on a leader, one of them, for every partition and
// returns the leaders by partition.
func (c *cluster) waitLeaders(nodes []*node, timeout time.Duration) leadership {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, err := c.observeLeaders(nodes)
		if err == nil && len(l.leader) == c.opts.partitions {
			return l
		}
		if time.Now().After(deadline) {
			var missing []string
			for p := range c.opts.partitions {
				if _, ok := l.leader[p]; !ok {
					missing = append(missing, fmt.Sprintf("partition %d: %v", p, l.views[p]))
				}
			}
			c.t.Fatalf("the nodes %v did not agree on every partition's leader within %v (scrape: %v): %s",
				nodes, timeout, err, strings.Join(missing, "; "))
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// newClient returns a Go client of the cluster, bootstrapped with every node. onRetry, if not
// nil, sees every retry.
func (c *cluster) newClient(onRetry func(client.Retry)) *client.Client {
	c.t.Helper()
	cl, err := client.New(client.Options{
		Bootstrap:   c.grpcAddrs(),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		// A node that stops answering (stopped, cut off) costs one attempt, not the call.
		AttemptTimeout: time.Second,
		RetryBackoff:   client.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		OnRetry:        onRetry,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// dialConn returns a plaintext connection to n's gRPC port, closed when the test ends.
func dialConn(t *testing.T, n *node) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// dialNode returns a plain gRPC stub of n's state service: no lookups, no retries.
func dialNode(t *testing.T, n *node) pb.ShareCoordinatorServiceClient {
	t.Helper()
	return pb.NewShareCoordinatorServiceClient(dialConn(t, n))
}

// partitionOf returns the state partition of key k of the workload and its leader as the
// cluster names it (FindCoordinator).
func (c *cluster) partitionOf(cl *client.Client, w *workload, k int) (part, leader int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := cl.Owner(ctx, w.group, w.topic, int32(k))
	if err != nil {
		c.t.Fatalf("FindCoordinator for key %d: %v", k, err)
	}
	return int(o.StatePartition), int(o.NodeID)
}

var keepFailures = flag.Bool("clustertest.keep", false, "keep the logs of every test, passed or failed, in the directory it prints")

// outputDir returns the directory for a test's files to look at afterwards (the porcupine
// visualization, the servers' logs): the test's artifact directory with go test -artifacts,
// else a directory under the system's temporary directory that is kept.
func outputDir(t *testing.T) string {
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	if dir, ok := outputDirs.Load(t); ok {
		return dir.(string)
	}
	dir, err := os.MkdirTemp("", "clustertest-"+strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())+"-")
	if err != nil {
		t.Logf("no directory for the test's output: %v", err)
		return ""
	}
	outputDirs.Store(t, dir)
	return dir
}

// outputDirs are the output directories made so far, by test.
var outputDirs sync.Map

// saveLogsOnFailure writes every node's logs to the test's output directory when the test
// failed (or -clustertest.keep is set).
func (c *cluster) saveLogsOnFailure() {
	if !c.t.Failed() && !*keepFailures {
		return
	}
	dir := outputDir(c.t)
	if dir == "" {
		return
	}
	for _, n := range c.nodes {
		if err := n.saveLogs(dir); err != nil {
			c.t.Logf("save the logs of %v: %v", n, err)
		}
	}
	c.t.Logf("the servers' logs are in %s", dir)
}
