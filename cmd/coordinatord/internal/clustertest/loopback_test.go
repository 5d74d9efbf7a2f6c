package clustertest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// The loopback tests run every node on an address of its own in 127.0.0.0/8 and need no
// privileges.

// TestKillLeaders kills (SIGKILL) the node leading a key's partition under load, restarts it,
// and once it is back and caught up kills another node that leads partitions. The survivors must
// elect new leaders and serve every key meanwhile; the history must be linearizable and every
// acknowledged write read back.
func TestKillLeaders(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 3})
	c.start()
	w := newWorkload(t, c, workloadOptions{})
	w.run()
	loadFor(2 * time.Second)

	_, first := c.partitionOf(w.cl, w, 0)
	killAndRestart(t, c, w, c.node(first))
	second := 0
	for _, id := range c.waitBalanced().leader {
		if id != first {
			second = id
			break
		}
	}
	if second == 0 {
		t.Fatalf("no node but %d leads a partition", first)
	}
	killAndRestart(t, c, w, c.node(second))
	c.waitLeaders(c.nodes, leaderTimeout)
	loadFor(time.Second)
	w.finish()
}

// killAndRestart kills n under load, checks that the other nodes elect leaders for every
// partition and serve every key, then restarts n and waits until it caught up.
func killAndRestart(t *testing.T, c *cluster, w *workload, n *node) {
	t.Helper()
	n.kill()
	killed := w.hist.now()
	l := c.waitLeaders(c.others(n.id), leaderTimeout)
	elected := w.hist.now()
	t.Logf("killed node %d; the others agree on every partition's leader after %v: %v",
		n.id, time.Duration(elected-killed).Round(time.Millisecond), l.leader)
	loadFor(3 * time.Second)
	w.requireServed(elected, w.hist.now(), "with node "+strconv.Itoa(n.id)+" killed")
	n.start()
	n.waitReady(readyTimeout)
}

// TestPausedLeader stops (SIGSTOP) the node leading a key's partition for longer than an
// election takes, then lets it go on (SIGCONT). While it is stopped the others must elect
// leaders and serve every key. What it must not do: acknowledge a write sent to it after it was
// stopped, as the leader it still believes it is. Writes sent straight to it (a plain gRPC stub,
// no retries) while it is stopped wait in its socket buffers and reach it when it goes on, in
// the term it was stopped in; a successful answer to one is legitimate only if the node has led
// the partition again in a later term by then. The test checks exactly that against the node's
// log (--log-level debug logs each change of a partition's role with its term), checks that the
// log shows the node stepping down, and checks the whole history (the client's calls and the
// direct writes) for linearizability and read-back.
func TestPausedLeader(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 3, debugLog: true})
	c.start()
	w := newWorkload(t, c, workloadOptions{})
	part, leader := c.partitionOf(w.cl, w, 0)
	x := c.node(leader)
	l := c.waitLeaders(c.nodes, leaderTimeout)
	if l.leader[part] != x.id {
		t.Fatalf("FindCoordinator names node %d for partition %d, the metrics node %d", x.id, part, l.leader[part])
	}
	term := l.term[part]
	stub := dialNode(t, x)
	// A first call opens the connection, so that the writes sent during the stop travel on it.
	if d := w.directRead(context.Background(), stub, 100, 0); d.outcome != "" {
		t.Fatalf("read from node %d before the stop: %s", x.id, d.outcome)
	}
	w.run()
	loadFor(2 * time.Second)

	x.pause()
	stopped := w.hist.now()
	var direct []directCall
	var mu sync.Mutex
	var sent sync.WaitGroup
	for i := range 4 {
		sent.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			d := w.directWrite(ctx, stub, 101+i, 0)
			mu.Lock()
			direct = append(direct, d)
			mu.Unlock()
		})
	}
	// The others elect new leaders: the stop lasts past the election timeout.
	survivors := c.others(x.id)
	after := c.waitLeaders(survivors, leaderTimeout)
	elected := w.hist.now()
	if after.leader[part] == x.id || after.term[part] <= term {
		t.Fatalf("partition %d: leader %d at term %v after node %d stopped (it led at term %v)", part, after.leader[part], after.term[part], x.id, term)
	}
	t.Logf("node %d stopped; the others agree on every partition's leader after %v: %v",
		x.id, time.Duration(elected-stopped).Round(time.Millisecond), after.leader)
	loadFor(3 * time.Second)
	w.requireServed(elected, w.hist.now(), "with node "+strconv.Itoa(x.id)+" stopped")
	x.resume()
	sent.Wait()

	// The node steps down: its log shows partition part's role change to not leading, in the
	// later term.
	if _, ok := x.current().waitLine(30*time.Second, func(l logLine) bool {
		p, _ := l.int("state_partition")
		lt, _ := l.int("term")
		leading, ok := l.bool("leading")
		return l.Msg == "state partition role" && int(p) == part && ok && !leading && float64(lt) > term
	}); !ok {
		t.Errorf("node %d's log does not show it stepping down from partition %d after term %v", x.id, part, term)
	}
	checkDirectWrites(t, x, part, term, direct)
	x.waitReady(readyTimeout)
	c.waitLeaders(c.nodes, leaderTimeout)
	loadFor(time.Second)
	w.finish()
}

// checkDirectWrites fails the test for each write sent straight to x that x acknowledged without
// having led partition part in a term after term by then, per its log. The log's timestamps are
// milliseconds and are taken just after the role changes: a leadership is counted from 50 ms
// before its log line.
func checkDirectWrites(t *testing.T, x *node, part int, term float64, direct []directCall) {
	t.Helper()
	var reelected []time.Time
	for _, l := range x.current().logLines() {
		p, _ := l.int("state_partition")
		lt, _ := l.int("term")
		if leading, ok := l.bool("leading"); l.Msg == "state partition role" && int(p) == part && ok && leading && float64(lt) > term {
			reelected = append(reelected, l.TS)
		}
	}
	acked := 0
	for _, d := range direct {
		if d.outcome != "" {
			continue
		}
		acked++
		if len(reelected) == 0 || reelected[0].Add(-50*time.Millisecond).After(d.retWall) {
			t.Errorf("node %d acknowledged write %+v sent to it after it was stopped, before it led partition %d again (re-elected: %v)",
				x.id, d.in, part, reelected)
		}
	}
	t.Logf("writes sent to node %d while it was stopped: %d, acknowledged %d (each after it was elected again); outcomes: %v",
		x.id, len(direct), acked, outcomes(direct))
}

func outcomes(ds []directCall) map[string]int {
	out := map[string]int{}
	for _, d := range ds {
		o := d.outcome
		if o == "" {
			o = "ok"
		}
		out[o]++
	}
	return out
}

// TestRollingRestart stops (SIGTERM) each node of three in turn under load, restarts it and waits
// until it is ready before the next. A planned stop hands the node's leaderships over first, so
// the client sees only retriable answers (NOT_COORDINATOR, unreachable nodes, ...), which it
// retries: every call must succeed, none may come back with an error, and nothing may be lost.
func TestRollingRestart(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 3})
	c.start()
	w := newWorkload(t, c, workloadOptions{})
	w.run()
	loadFor(time.Second)
	for _, n := range c.nodes {
		n.terminate()
		if l, ok := n.current().waitLine(time.Second, func(l logLine) bool { return l.Msg == "handed the leaderships of this node over" }); !ok {
			t.Errorf("%v did not log handing its leaderships over", n)
		} else if left, _ := l.int("still_led"); left != 0 {
			t.Errorf("%v stopped still leading %d partitions", n, left)
		}
		n.start()
		n.waitReady(readyTimeout)
		// As an operator would: the next stop once the restarted node leads its share again.
		c.waitBalanced()
		loadFor(time.Second)
	}
	w.finish()
	w.stats.mu.Lock()
	defer w.stats.mu.Unlock()
	if w.stats.writesFail+w.stats.readsFail > 0 {
		t.Errorf("calls failed during the rolling restart: %v", w.stats.failures)
	}
	if w.stats.retries == 0 {
		t.Errorf("the client retried nothing: the restarts did not move any leadership it used")
	}
	t.Logf("client retries during the rolling restart: %d, by code %v", w.stats.retries, w.stats.retryCodes)
}

// TestFiveNodesKillLeader runs five nodes with replication factor 3, so that each partition has
// replicas on three of them and the others answer for it from the cluster metadata, kills the
// leader of a key's partition, and checks that every key is still served, that leaders go back
// to their preferred nodes once it returns, and that the history is linearizable.
func TestFiveNodesKillLeader(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 5, partitions: 10, replication: 3})
	c.start()
	for _, n := range c.nodes {
		m, err := n.scrape()
		if err != nil {
			t.Fatal(err)
		}
		if held := len(m["sharecoord_raft_leader_node"]); held != 6 {
			t.Errorf("%v holds replicas of %d partitions, want 6 (3 of 5 nodes hold each of 10)", n, held)
		}
	}
	w := newWorkload(t, c, workloadOptions{keys: 8})
	w.run()
	loadFor(2 * time.Second)
	_, leader := c.partitionOf(w.cl, w, 0)
	killAndRestart(t, c, w, c.node(leader))
	// The returned node takes its preferred leaderships back; until it has, a partition's leader
	// read now may move, and the outsider would rightly name the new one.
	l := c.waitBalanced()
	part, _ := c.partitionOf(w.cl, w, 0)
	requireRedirect(t, c, w, part, l.leader[part])
	w.finish()
}

// requireRedirect checks that a node holding no replica of partition part answers a write of
// key 0 (of part) with NOT_COORDINATOR naming leader, which it knows from the cluster metadata
// (the leader announces itself there), once that announcement reached it.
func requireRedirect(t *testing.T, c *cluster, w *workload, part, leader int) {
	t.Helper()
	var outsider *node
	for _, n := range c.nodes {
		m, err := n.scrape()
		if err != nil {
			t.Fatal(err)
		}
		if _, held := m["sharecoord_raft_leader_node"][part]; !held {
			outsider = n
			break
		}
	}
	if outsider == nil {
		t.Fatalf("every node holds a replica of partition %d", part)
	}
	stub := dialNode(t, outsider)
	want := fmt.Sprintf("led by node %d (%s)", leader, c.node(leader).grpcAddr())
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// Offset 0 with start offset 0: were it applied, it would change nothing (the start
		// offset is past it); but a node without a replica must not apply anything.
		resp, err := stub.WriteShareGroupState(ctx, w.writeRequest(0, 0, 0))
		cancel()
		got := fmt.Sprint(resp, err)
		if rs := resp.GetResults(); err == nil && len(rs) == 1 && len(rs[0].GetPartitions()) == 1 {
			pr := rs[0].GetPartitions()[0]
			switch {
			case pr.GetErrorCode() == pb.ErrorCode_ERROR_CODE_NONE:
				t.Fatalf("%v, holding no replica of partition %d, acknowledged a write of it", outsider, part)
			case pr.GetErrorCode() == pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR && strings.Contains(pr.GetErrorMessage(), want):
				return
			}
			got = pr.GetErrorCode().String() + " " + pr.GetErrorMessage()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v, holding no replica of partition %d, answers %s; want NOT_COORDINATOR naming node %d", outsider, part, got, leader)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}
