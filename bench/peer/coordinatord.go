package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordinatord/coordinatord/client"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// coordHost is node i's (1-based) loopback address; it serves gRPC on 7070, metrics on 7071 and
// replication on 7072.
func coordHost(i int) string { return fmt.Sprintf("127.0.0.%d", 20+i) }

// coordCluster is a running coordinatord of one or more nodes.
type coordCluster struct {
	nodes []*proc
	grpc  []string // gRPC addresses, by node
	admin []string // metrics base URLs, by node
}

// coordOptions choose how a coordinatord is started.
type coordOptions struct {
	bin   string
	nodes int
	// raft starts a single node in cluster mode too (--initial-cluster naming itself), where
	// by default a single node takes the single-node path.
	raft     bool
	pprof    bool
	logLevel string
}

// startCoordinatord starts the nodes with their data under dir, with the default configuration
// (50 state partitions, every write acknowledged once durable), and waits until they are ready.
func startCoordinatord(ctx context.Context, o coordOptions, dir string) (*coordCluster, error) {
	var initial, addrs []string
	for i := 1; i <= o.nodes; i++ {
		initial = append(initial, fmt.Sprintf("%d=%s:7072", i, coordHost(i)))
		addrs = append(addrs, coordHost(i)+":7070", coordHost(i)+":7071", coordHost(i)+":7072")
	}
	if err := checkFree(addrs...); err != nil {
		return nil, err
	}
	c := &coordCluster{}
	for i := 1; i <= o.nodes; i++ {
		host := coordHost(i)
		args := []string{"--node-id", strconv.Itoa(i), "--listen", host + ":7070", "--metrics-listen", host + ":7071",
			"--data-dir", filepath.Join(dir, fmt.Sprintf("node-%d", i)), "--log-level", o.logLevel}
		if o.nodes > 1 || o.raft {
			args = append(args, "--raft-listen", host+":7072", "--initial-cluster", strings.Join(initial, ","))
		}
		if o.pprof {
			args = append(args, "--enable-pprof")
		}
		p := &proc{name: fmt.Sprintf("coordinatord node %d", i), bin: o.bin, args: args, log: filepath.Join(dir, fmt.Sprintf("node-%d.log", i))}
		if err := p.start(); err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, p)
		c.grpc = append(c.grpc, host+":7070")
		c.admin = append(c.admin, "http://"+host+":7071")
	}
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// waitReady waits until every node answers /readyz with 200 and, in a cluster, the partitions'
// leaderships are spread evenly (the nodes hand them to their preferred leaders once caught up).
func (c *coordCluster) waitReady(ctx context.Context, timeout time.Duration) error {
	for i := range c.nodes {
		if err := c.waitNodeReady(ctx, i, timeout); err != nil {
			return err
		}
	}
	if len(c.nodes) == 1 {
		return nil
	}
	return waitFor(ctx, nil, timeout, 200*time.Millisecond, "leaderships spread over the nodes", func() bool { return c.balanced(ctx) })
}

// waitNodeReady waits until node i (0-based) answers /readyz with 200.
func (c *coordCluster) waitNodeReady(ctx context.Context, i int, timeout time.Duration) error {
	p := c.nodes[i]
	return waitFor(ctx, p, timeout, 20*time.Millisecond, p.name+" ready", func() bool {
		return httpStatus(ctx, c.admin[i]+"/readyz") == 200
	})
}

// balanced reports whether every state partition has a leader and the nodes lead as many
// partitions as each other, give or take one.
func (c *coordCluster) balanced(ctx context.Context) bool {
	leaders, partitions, err := c.leaders(ctx)
	if err != nil || partitions == 0 || len(leaders) != partitions {
		return false
	}
	counts := make([]int, len(c.nodes))
	for _, n := range leaders {
		counts[n-1]++
	}
	return slices.Max(counts)-slices.Min(counts) <= 1
}

// preferred reports whether every state partition is led by its preferred leader: with nodes
// 1 to n, partition p's is node p mod n + 1 (the nodes take turns), where the nodes hand the
// leaderships back once caught up.
func (c *coordCluster) preferred(ctx context.Context) bool {
	leaders, partitions, err := c.leaders(ctx)
	if err != nil || partitions == 0 || len(leaders) != partitions {
		return false
	}
	for p, n := range leaders {
		if p%len(c.nodes)+1 != n {
			return false
		}
	}
	return true
}

// leaders reads every node's metrics: the node (1-based) each state partition's replica there
// says it leads, and the number of state partitions.
func (c *coordCluster) leaders(ctx context.Context) (map[int]int, int, error) {
	leaders, partitions := map[int]int{}, 0
	for i := range c.nodes {
		led, held, err := leaderships(ctx, c.admin[i])
		if err != nil {
			return nil, 0, err
		}
		for _, p := range led {
			leaders[p] = i + 1
		}
		partitions = max(partitions, held)
	}
	return leaders, partitions, nil
}

// leaderships reads a node's metrics: the state partitions it leads and how many it holds a
// replica of.
func leaderships(ctx context.Context, base string) (led []int, held int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	led, held = parseLeaderships(resp.Body)
	return led, held, nil
}

// parseLeaderships reads the sharecoord_raft_leader samples of a Prometheus text exposition: the
// partitions of those of value 1, and the number of samples.
func parseLeaderships(r io.Reader) (led []int, held int) {
	const prefix = `sharecoord_raft_leader{partition="`
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		held++
		part, value, ok := strings.Cut(rest, `"} `)
		p, err := strconv.Atoi(part)
		if ok && err == nil && value == "1" {
			led = append(led, p)
		}
	}
	return led, held
}

func (c *coordCluster) stop() {
	for _, p := range c.nodes {
		p.stop(30 * time.Second)
	}
}

// coordTarget drives a coordinatord with conns clients of the client package, each knowing every
// node and sending each write to the leader of its share partition's state partition.
type coordTarget struct {
	clients []*client.Client
}

// Of opts, only the retry backoff and the coalescing bound are used.
func newCoordTarget(c *coordCluster, conns int, opts client.Options) (*coordTarget, error) {
	clients, err := openClients(conns, func() (*client.Client, error) {
		return client.New(client.Options{
			Bootstrap:       c.grpc,
			DialOptions:     []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
			RetryBackoff:    opts.RetryBackoff,
			InFlightPerNode: opts.InFlightPerNode,
		})
	})
	return &coordTarget{clients: clients}, err
}

// prepare initializes every share partition (state epoch 1, start offset 0) with every client,
// so that each has learned the leaders before the measurement.
func (t *coordTarget) prepare(ctx context.Context, keys int) error {
	for _, cl := range t.clients {
		for lo := 0; lo < keys; lo += 100 {
			var parts []*pb.InitializeStatePartition
			for k := lo; k < min(lo+100, keys); k++ {
				parts = append(parts, &pb.InitializeStatePartition{Partition: int32(k), StateEpoch: 1})
			}
			resp, err := cl.InitializeShareGroupState(ctx, &pb.InitializeShareGroupStateRequest{
				GroupId: benchGroup, Topics: []*pb.InitializeStateTopic{{TopicId: benchTopic, Partitions: parts}},
			})
			if err != nil {
				return fmt.Errorf("coordinatord: initialize: %w", err)
			}
			if cause := firstError(resp.GetResults()); cause != "" {
				return fmt.Errorf("coordinatord: initialize: %s", cause)
			}
		}
	}
	return nil
}

func (t *coordTarget) writer(c int) writer {
	cl := t.clients[c]
	return func(ctx context.Context, _ int, req *pb.WriteShareGroupStateRequest) string {
		resp, err := cl.WriteShareGroupState(ctx, req)
		if err != nil {
			return shortCause(err)
		}
		return firstError(resp.GetResults())
	}
}

// firstError is the name of the first error code other than NONE among results, or "".
func firstError(results []*pb.TopicResult) string {
	for _, r := range results {
		for _, p := range r.GetPartitions() {
			if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				return strings.TrimPrefix(p.GetErrorCode().String(), "ERROR_CODE_")
			}
		}
	}
	return ""
}

func (t *coordTarget) close() { closeAll(t.clients) }
