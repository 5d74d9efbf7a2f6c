package clustertest

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runCLI runs `coordinatord ARGS...` and returns its output and exit status.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(binPath, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// nodeRow matches one row of list-nodes: id, gRPC and Raft addresses, membership, state, contact,
// replicas, moving replicas, leaders.
var nodeRow = regexp.MustCompile(`(?m)^(\d+)\s+(\S+)\s+(\S+)\s+(\w+)\s+(\w+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)

// listedNodes returns list-nodes' rows reordered as id, gRPC and Raft addresses, state, contact,
// replicas, leaders, membership and moving replicas.
func listedNodes(out string) [][]string {
	var rows [][]string
	for _, m := range nodeRow.FindAllStringSubmatch(out, -1) {
		rows = append(rows, []string{m[0], m[1], m[2], m[3], m[5], m[6], m[7], m[9], m[4], m[8]})
	}
	return rows
}

// TestClusterCommands drives `coordinatord cluster`: list-nodes shows every node up with its
// replicas and leaderships; transfer-leader moves a partition's leadership and the preference
// lasts (the balancer keeps it there, and it comes back after its node restarts) until cleared;
// a node that is down is listed unreachable; a bad request is refused naming what is allowed.
func TestClusterCommands(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 3, partitions: 6})
	c.start()
	server := "--server=" + c.node(1).grpcAddr()

	out, code := runCLI(t, "cluster", "list-nodes", server)
	if code != 0 {
		t.Fatalf("list-nodes: exit %d\n%s", code, out)
	}
	rows := listedNodes(out)
	if len(rows) != 3 {
		t.Fatalf("list-nodes listed %d nodes, want 3:\n%s", len(rows), out)
	}
	leaders := 0
	for i, r := range rows {
		n := c.node(i + 1)
		wantState := "up"
		if i == 0 {
			wantState = "self"
		}
		if r[1] != strconv.Itoa(n.id) || r[2] != n.grpcAddr() || r[3] != n.raftAddr() || r[4] != wantState || r[6] != "6" {
			t.Errorf("list-nodes row %q, want node %d at %s / %s, %s, 6 replicas", r[0], n.id, n.grpcAddr(), n.raftAddr(), wantState)
		}
		l, _ := strconv.Atoi(r[7])
		leaders += l
	}
	if leaders != 6 || !strings.Contains(out, "6 state partitions; as node 1 sees them") {
		t.Errorf("list-nodes: %d leaderships in all, want 6:\n%s", leaders, out)
	}

	// bench load --cluster sends each write to its partition's leader, so none fails.
	out, code = runCLI(t, "bench", "load", "--cluster", "--target", c.node(2).grpcAddr(), "--phases", "write",
		"--duration", "2s", "--warmup", "500ms", "--keys", "64", "--concurrency", "8", "--quiet")
	if code != 0 {
		t.Fatalf("bench load --cluster: exit %d\n%s", code, out)
	}

	// Partition 0 prefers node 1; move it to node 3.
	out, code = runCLI(t, "cluster", "transfer-leader", server, "--partition", "0", "--to", "3")
	if code != 0 || !strings.Contains(out, "state partition 0 is led by node 3") {
		t.Fatalf("transfer-leader: exit %d\n%s", code, out)
	}
	time.Sleep(3 * time.Second) // longer than the balancer's interval: it must not move it back
	if l := c.waitLeaders(c.nodes, leaderTimeout); l.leader[0] != 3 {
		t.Fatalf("partition 0 is led by node %d after the transfer, want 3", l.leader[0])
	}
	// The preference outlives its node: killed, another node leads; restarted, node 3 again.
	c.node(3).kill()
	out, _ = runCLI(t, "cluster", "list-nodes", server)
	deadline := time.Now().Add(20 * time.Second)
	for !regexp.MustCompile(`(?m)^3\s.*unreachable`).MatchString(out) && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		out, _ = runCLI(t, "cluster", "list-nodes", server)
	}
	if !regexp.MustCompile(`(?m)^3\s.*unreachable`).MatchString(out) {
		t.Errorf("node 3 is down but list-nodes does not say it is unreachable:\n%s", out)
	}
	c.node(3).start()
	c.node(3).waitReady(readyTimeout)
	waitLeaderOf(t, c, 0, 3)

	// Cleared, the placement's preference is back.
	out, code = runCLI(t, "cluster", "transfer-leader", server, "--partition", "0", "--to", "0")
	if code != 0 || !strings.Contains(out, "state partition 0 is led by node 1") {
		t.Fatalf("transfer-leader --to 0: exit %d\n%s", code, out)
	}
	c.waitBalanced()

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partition", "6", "--to", "1"}, "no such state partition: 6, want [0, 6)"},
		{[]string{"--partition", "0", "--to", "9"}, "node 9 does not hold state partition 0"},
		{[]string{"--partition", "0", "--to", "-1"}, "want a node id ≥ 1, or 0"},
	} {
		out, code := runCLI(t, append([]string{"cluster", "transfer-leader", server}, tc.args...)...)
		if code != 1 || !strings.Contains(out, "InvalidArgument") || !strings.Contains(out, tc.want) {
			t.Errorf("transfer-leader %v: exit %d, want 1 with InvalidArgument and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
}

// waitLeaderOf waits until partition p is led by node id.
func waitLeaderOf(t *testing.T, c *cluster, p, id int) {
	t.Helper()
	deadline := time.Now().Add(leaderTimeout)
	for {
		l := c.waitLeaders(c.nodes, leaderTimeout)
		if l.leader[p] == id {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d is led by node %d, want %d", p, l.leader[p], id)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
