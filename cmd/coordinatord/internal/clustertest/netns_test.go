package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// The network tests run each node in a network namespace of its own, joined to a bridge by a
// veth pair, so that iptables rules in a node's namespace cut or degrade exactly its traffic.
// They need root; elsewhere they skip saying so.

// electionTimeout is the Raft election timeout of cluster.DefaultTiming: 50 ticks of 20 ms. A
// follower campaigns between one and two of them after it last heard from its leader, and a
// leader that has not heard from a quorum for one steps down (CheckQuorum).
const electionTimeout = time.Second

// netLab is a test's network: a namespace per node, each joined by a veth pair to a bridge in a
// namespace of its own, and one more veth pair from the test's own namespace to the bridge, so
// that the test's clients reach every node at 10.250.X.N from .254. Its names carry a random tag
// so that parallel or leftover runs do not collide; the test's cleanup deletes all of it.
type netLab struct {
	t      *testing.T
	tag    string
	subnet string   // "10.250.X"
	bridge string   // the bridge's namespace
	netns  []string // the nodes' namespaces, by index
	hosts  []string // the nodes' addresses, by index
}

// requireNetns skips the test unless it runs as root, and fails it when the tools it needs are
// missing (CI runs as root with them installed: a test that silently skipped there would hide a
// missing install step).
func requireNetns(t *testing.T) {
	t.Helper()
	requireRoot(t, "creates network namespaces and iptables rules")
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install -y iproute2 iptables): %v", tool, err)
		}
	}
}

// newNetLab builds the network of a cluster of n nodes.
func newNetLab(t *testing.T, n int) *netLab {
	t.Helper()
	requireNetns(t)
	var b [2]byte
	_, _ = rand.Read(b[:])
	l := &netLab{t: t, tag: "cf" + hex.EncodeToString(b[:]), subnet: freeSubnet(t)}
	l.bridge = l.tag + "-br"
	l.ip("netns", "add", l.bridge)
	t.Cleanup(func() { l.cleanup("netns", "del", l.bridge) })
	l.ip("-n", l.bridge, "link", "add", "br0", "type", "bridge")
	l.ip("-n", l.bridge, "link", "set", "br0", "up")
	// The test's own end, .254. Deleting the bridge's namespace deletes its peer and so this
	// end too; the cleanup says so if it did not.
	hostEnd, bridgeEnd := l.tag+"h0", l.tag+"b0"
	l.ip("link", "add", hostEnd, "type", "veth", "peer", "name", bridgeEnd, "netns", l.bridge)
	t.Cleanup(func() { l.cleanup("link", "del", hostEnd) })
	l.ip("-n", l.bridge, "link", "set", bridgeEnd, "master", "br0", "up")
	l.ip("addr", "add", l.subnet+".254/24", "dev", hostEnd)
	l.ip("link", "set", hostEnd, "up")
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("%s-n%d", l.tag, i)
		l.ip("netns", "add", ns)
		t.Cleanup(func() { l.cleanup("netns", "del", ns) })
		end, peer := fmt.Sprintf("%sv%d", l.tag, i), fmt.Sprintf("%sb%d", l.tag, i)
		l.ip("link", "add", end, "netns", ns, "type", "veth", "peer", "name", peer, "netns", l.bridge)
		l.ip("-n", l.bridge, "link", "set", peer, "master", "br0", "up")
		l.ip("-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", l.subnet, i), "dev", end)
		l.ip("-n", ns, "link", "set", end, "up")
		l.ip("-n", ns, "link", "set", "lo", "up")
		l.netns = append(l.netns, ns)
		l.hosts = append(l.hosts, fmt.Sprintf("%s.%d", l.subnet, i))
	}
	return l
}

// freeSubnet picks 10.250.X.0/24 with an X no interface or route of this namespace uses.
func freeSubnet(t *testing.T) string {
	t.Helper()
	addrs, err1 := exec.Command("ip", "-4", "addr").Output()
	routes, err2 := exec.Command("ip", "-4", "route").Output()
	if err1 != nil || err2 != nil {
		t.Fatalf("list this namespace's addresses and routes: %v %v", err1, err2)
	}
	used := string(addrs) + string(routes)
	for range 100 {
		s := fmt.Sprintf("10.250.%d", 1+mrand.IntN(254))
		if !strings.Contains(used, s+".") {
			return s
		}
	}
	t.Fatal("no free 10.250.X.0/24 subnet")
	return ""
}

// ip runs ip(8) with args and fails the test if it fails.
func (l *netLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// cleanup runs ip(8) with args, for the test's cleanup: a thing already gone is no error.
func (l *netLab) cleanup(args ...string) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file") && !strings.Contains(string(out), "Cannot find device") &&
		!strings.Contains(string(out), "does not exist") {
		l.t.Errorf("cleanup: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// iptables runs iptables with args in node id's namespace.
func (l *netLab) iptables(id int, args ...string) {
	l.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.netns[id-1], "iptables", "-w"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("iptables %s in %s: %v: %s", strings.Join(args, " "), l.netns[id-1], err, out)
	}
}

// direction says which of a node's packets a cut drops.
type direction int

const (
	both     direction = iota
	incoming           // what the others send it
	outgoing           // what it sends the others
)

func (d direction) String() string { return [...]string{"both ways", "incoming", "outgoing"}[d] }

// cut drops the packets between node id and the other nodes in direction d. The test's
// clients (at .254) still reach it. The rules apply to every packet, of established
// connections too, from the moment iptables returns.
func (l *netLab) cut(id int, d direction) {
	l.t.Helper()
	for j := range l.hosts {
		if j == id-1 {
			continue
		}
		if d != outgoing {
			l.iptables(id, "-A", "INPUT", "-s", l.hosts[j], "-j", "DROP")
		}
		if d != incoming {
			l.iptables(id, "-A", "OUTPUT", "-d", l.hosts[j], "-j", "DROP")
		}
	}
}

// lose drops each packet node id receives with probability p, and each it sends too if
// sending.
func (l *netLab) lose(id int, p float64, sending bool) {
	l.t.Helper()
	prob := strconv.FormatFloat(p, 'f', -1, 64)
	l.iptables(id, "-A", "INPUT", "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP")
	if sending {
		l.iptables(id, "-A", "OUTPUT", "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP")
	}
}

// heal removes every rule of node id's namespace.
func (l *netLab) heal(id int) {
	l.t.Helper()
	l.iptables(id, "-F", "INPUT")
	l.iptables(id, "-F", "OUTPUT")
}

// newNetCluster returns a cluster of n nodes in a new netLab, started, every partition led by its
// preferred node.
func newNetCluster(t *testing.T, n int) (*netLab, *cluster) {
	t.Helper()
	lab := newNetLab(t, n)
	c := newCluster(t, clusterOptions{nodes: n, hosts: lab.hosts, netns: lab.netns})
	c.start()
	return lab, c
}

// TestPartitionedLeader cuts the leader of a key's partition off from the other two nodes, both
// ways, under load. The test's client still reaches it: writes and reads sent to it directly
// (a plain gRPC stub) after the cut must all fail, since nothing it does can reach a quorum; it
// must step down within a few election timeouts (CheckQuorum); the other two must elect leaders
// and serve every key. Once healed, the nodes agree on the leaders again and the history is
// linearizable with every acknowledged write read back.
func TestPartitionedLeader(t *testing.T) {
	partitionLeader(t, both)
}

// TestOneWayPartition does the same with one-way cuts: only the packets the leader receives from
// the others dropped, or only those it sends them. Either way it can commit nothing (it hears no
// acknowledgement, or sends no entry), so it must acknowledge nothing and step down, and the
// others must take over.
func TestOneWayPartition(t *testing.T) {
	for _, d := range []direction{incoming, outgoing} {
		t.Run(d.String(), func(t *testing.T) { partitionLeader(t, d) })
	}
}

func partitionLeader(t *testing.T, d direction) {
	lab, c := newNetCluster(t, 3)
	w := newWorkload(t, c, workloadOptions{})
	part, leader := c.partitionOf(w.cl, w, 0)
	x := c.node(leader)
	var led []int
	for p, id := range c.waitLeaders(c.nodes, leaderTimeout).leader {
		if id == x.id {
			led = append(led, p)
		}
	}
	stub := dialNode(t, x)
	side := w.sideKey(part)
	if dc, _ := w.sendRead(context.Background(), stub, side); dc.outcome != "" {
		t.Fatalf("read from node %d before the cut: %s", x.id, dc.outcome)
	}
	w.run()
	loadFor(2 * time.Second)

	lab.cut(x.id, d)
	cut := w.hist.now()
	direct := sendDirect(w, stub, side)
	down := c.waitStepDown(x, led, 5*electionTimeout)
	t.Logf("node %d, cut off (%v), stopped leading partitions %v after %v", x.id, d, led, down.Round(time.Millisecond))
	l := c.waitLeaders(c.others(x.id), leaderTimeout)
	elected := w.hist.now()
	if l.leader[part] == x.id {
		t.Fatalf("partition %d still led by node %d", part, x.id)
	}
	t.Logf("the others agree on every partition's leader %v after the cut: %v", time.Duration(elected-cut).Round(time.Millisecond), l.leader)
	loadFor(3 * time.Second)
	w.requireServed(elected, w.hist.now(), fmt.Sprintf("with node %d cut off (%v)", x.id, d))
	calls := direct.stop()

	// Every direct call was made after the cut and has returned before the heal: none can
	// have reached a quorum.
	for _, dc := range calls {
		if dc.outcome == "" {
			t.Errorf("node %d, cut off from the others (%v), answered %+v with success (sent %v after the cut)",
				x.id, d, dc.in, time.Duration(dc.call-cut))
		}
	}
	t.Logf("calls sent to node %d while it was cut off: %d; outcomes %v", x.id, len(calls), outcomes(calls))
	lab.heal(x.id)
	healed := time.Now()
	c.waitLeaders(c.nodes, leaderTimeout)
	x.waitReady(readyTimeout)
	t.Logf("healed: the nodes agree on every partition's leader, node %d ready, after %v", x.id, time.Since(healed).Round(time.Millisecond))
	loadFor(time.Second)
	w.finish()
	w.checkSide(side, calls)
}

// directSender sends writes and reads of one key to one node, one at a time, until stopped: the
// writes of offsets 1, 2, ... with start offset 0 (see checkSide).
type directSender struct {
	quit  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	calls []directCall
}

// sendDirect starts sending writes and reads of key k through stub, each bounded by 3 s.
func sendDirect(w *workload, stub pb.ShareCoordinatorServiceClient, k int) *directSender {
	s := &directSender{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for i := 0; ; i++ {
			select {
			case <-s.quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			var dc directCall
			if i%2 == 0 {
				dc = w.sendWrite(ctx, stub, opInput{kind: opWrite, key: k, start: 0, offset: int64(i/2 + 1)})
			} else {
				dc, _ = w.sendRead(ctx, stub, k)
			}
			cancel()
			s.mu.Lock()
			s.calls = append(s.calls, dc)
			s.mu.Unlock()
			select {
			case <-s.quit:
				return
			case <-time.After(50 * time.Millisecond): // pace
			}
		}
	}()
	return s
}

// stop stops the sender, waits for its call in flight and returns every call.
func (s *directSender) stop() []directCall {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestPacketLoss drops 20% of the packets of one node (both ways), then of every node (those
// they receive), under load: the cluster must go on serving every key, more slowly, with a
// linearizable history.
func TestPacketLoss(t *testing.T) {
	// 20 % loss both ways on one node; 10 % of what every node receives. TCP stalls a
	// replication stream for a retransmission timeout (200 ms, doubling) at each loss, so 20 % on
	// every link delays heartbeats past the election timeout often enough to keep a partition
	// electing for seconds at a time: still safe, but no longer a test of service.
	for _, tc := range []struct {
		name  string
		nodes []int
		both  bool
		loss  float64
	}{
		{"one node", []int{1}, true, 0.2},
		{"all nodes", []int{1, 2, 3}, false, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab, c := newNetCluster(t, 3)
			// Two workers per key, each on its own key: a call to a partition led by a lossy node
			// can take seconds (attempts time out while TCP backs off), and workers shared by
			// every key would all end up waiting on such calls, starving the healthy keys. The
			// test asks whether each key is served, so each key has callers of its own.
			w := newWorkload(t, c, workloadOptions{workers: 12, pace: 20 * time.Millisecond, pinned: true})
			w.run()
			loadFor(2 * time.Second)
			before := w.hist.len()
			for _, id := range tc.nodes {
				lab.lose(id, tc.loss, tc.both)
			}
			lossy := w.hist.now()
			loadFor(6 * time.Second)
			until := w.hist.now()
			w.requireServed(lossy, until, fmt.Sprintf("with %.0f%% of the packets lost on %s", 100*tc.loss, tc.name))
			during := w.hist.len() - before
			for _, id := range tc.nodes {
				lab.heal(id)
			}
			c.waitLeaders(c.nodes, leaderTimeout)
			t.Logf("calls completed in the 6 s of loss: %d (%d in the 2 s before); successes per key: %v; %v",
				during, before, w.hist.served(lossy, until), &w.stats)
			w.finish()
		})
	}
}

// waitStepDown waits until n reports leading none of the partitions ps (the gauge
// sharecoord_raft_leader at 0 for each) and returns how long that took.
func (c *cluster) waitStepDown(n *node, ps []int, timeout time.Duration) time.Duration {
	c.t.Helper()
	began := time.Now()
	for {
		m, err := n.scrape()
		if err == nil {
			leading := 0
			for _, p := range ps {
				if m["sharecoord_raft_leader"][p] != 0 {
					leading++
				}
			}
			if leading == 0 {
				return time.Since(began)
			}
		}
		if time.Since(began) > timeout {
			c.t.Fatalf("%v still leads some of partitions %v after %v (scrape: %v)", n, ps, timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
