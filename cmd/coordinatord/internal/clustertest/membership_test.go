package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// membershipTimeout bounds one membership change of the tests: every replica moved caught up
// and the old ones removed.
const membershipTimeout = 3 * time.Minute

// listNodes asks node n for the cluster's nodes.
func listNodes(t *testing.T, n *node) (*pb.ListNodesResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return pb.NewClusterServiceClient(conn).ListNodes(ctx, &pb.ListNodesRequest{})
}

// waitMembers waits until node n lists exactly the nodes ids, every one active, none with a
// replica moving, and returns the list.
func waitMembers(t *testing.T, n *node, ids ...int) *pb.ListNodesResponse {
	t.Helper()
	deadline := time.Now().Add(membershipTimeout)
	for {
		resp, err := listNodes(t, n)
		if err == nil && len(resp.GetNodes()) == len(ids) {
			ok := true
			for i, m := range resp.GetNodes() {
				ok = ok && int(m.GetNodeId()) == ids[i] && m.GetMembership() == "active" && m.GetMoving() == 0
			}
			if ok {
				return resp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lists %v (%v), want nodes %v active and settled", n, resp.GetNodes(), err, ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// addJoiningNode prepares node id, which joins the running cluster through the nodes named.
func (c *cluster) addJoiningNode(id int, through ...*node) *node {
	host := c.opts.hosts[0][:strings.LastIndex(c.opts.hosts[0], ".")+1] + strconv.Itoa(id)
	n := &node{t: c.t, id: id, host: host, dataDir: filepath.Join(c.t.TempDir(), "node"+strconv.Itoa(id))}
	n.args = []string{
		"--node-id", strconv.Itoa(id),
		"--listen", n.grpcAddr(), "--metrics-listen", n.metricsAddr(), "--raft-listen", n.raftAddr(),
		"--raft-advertise", n.raftAddr(), "--join", joinList(through),
		"--data-dir", n.dataDir,
		"--override", "share.coordinator.state.topic.num.partitions=" + strconv.Itoa(c.opts.partitions),
	}
	c.nodes = append(c.nodes, n)
	c.t.Cleanup(n.cleanup)
	return n
}

func joinList(nodes []*node) string {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.grpcAddr())
	}
	return strings.Join(addrs, ",")
}

// TestMembershipChangesUnderLoad grows a three-node cluster to four under load (the new node
// joins by itself with --join; add-node with its address then waits until its replicas are in
// place), removes the first node (remove-node waits until its replicas moved and it left), and
// then wipes a founding node's data directory and restarts it with --join, which replaces it under
// new replica ids. The history must be linearizable with every acknowledged write read back, the
// only failures retriable ones, and the leaderships spread over the nodes left.
func TestMembershipChangesUnderLoad(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 3})
	c.start()
	w := newWorkload(t, c, workloadOptions{})
	w.run()
	loadFor(2 * time.Second)

	n4 := c.addJoiningNode(4, c.node(1), c.node(2))
	n4.start()
	n4.waitReady(readyTimeout)
	if out, code := runCLI(t, "cluster", "add-node", "--server", c.node(2).grpcAddr(), "--node-id", "4",
		"--raft-address", n4.raftAddr(), "--timeout", membershipTimeout.String()); code != 0 {
		t.Fatalf("add-node: exit %d\n%s", code, out)
	}
	resp := waitMembers(t, c.node(3), 1, 2, 3, 4)
	if got := resp.GetNodes()[3].GetReplicas(); got != 6 {
		t.Fatalf("node 4 holds %d replicas, want 6 of 24", got)
	}
	loadFor(2 * time.Second)

	if out, code := runCLI(t, "cluster", "remove-node", "--server", c.node(4).grpcAddr(), "--node-id", "1",
		"--timeout", membershipTimeout.String()); code != 0 {
		t.Fatalf("remove-node: exit %d\n%s", code, out)
	}
	waitMembers(t, c.node(2), 2, 3, 4)
	c.node(1).terminate()
	loadFor(2 * time.Second)

	n3 := c.node(3)
	n3.kill()
	if err := os.RemoveAll(n3.dataDir); err != nil {
		t.Fatal(err)
	}
	n3.args = append(n3.args, "--join", joinList([]*node{c.node(2), n4}))
	n3.start()
	n3.waitReady(readyTimeout)
	waitMembers(t, c.node(2), 2, 3, 4)
	loadFor(2 * time.Second)
	w.finish()
	for k, v := range w.stats.failures {
		if !strings.Contains(k, "NOT_COORDINATOR") && !strings.Contains(k, "COORDINATOR_NOT_AVAILABLE") &&
			!strings.Contains(k, "COORDINATOR_LOAD_IN_PROGRESS") && !strings.Contains(k, "Unavailable") && !strings.Contains(k, "DeadlineExceeded") {
			t.Errorf("%d calls failed with %s, which a client does not retry", v, k)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, _ = listNodes(t, c.node(2))
		lo, hi := 100, 0
		for _, m := range resp.GetNodes() {
			lo, hi = min(lo, int(m.GetLeaders())), max(hi, int(m.GetLeaders()))
		}
		if lo >= 2 && hi <= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaders per node %v, want 2 or 3 each of 8", resp.GetNodes())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubernetesStyle gives a node the StatefulSet's flags (deploy/base/statefulset.yaml): every pod,
// founding or not, names the founders in --initial-cluster, their gRPC addresses in --join, and
// its own replication address in --raft-advertise, from its first start on.
func (c *cluster) kubernetesStyle(n *node) {
	n.args = append(n.args, "--raft-advertise", n.raftAddr(), "--join", joinList(c.nodes[:3]))
}

// TestKubernetesStyleMembership runs the StatefulSet's command line under load: two pods found
// the cluster while the third has not started, which, started on its empty volume, is replaced
// under new replica ids (as is a pod whose volume was lost); a fourth pod, scaled up, joins by
// itself; scaled down after remove-node, the cluster goes on with three.
func TestKubernetesStyleMembership(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 3})
	for _, n := range c.nodes {
		c.kubernetesStyle(n)
	}
	for _, n := range c.nodes[:2] {
		n.start()
	}
	for _, n := range c.nodes[:2] {
		n.waitReady(readyTimeout)
	}
	w := newWorkload(t, c, workloadOptions{})
	w.run()
	loadFor(2 * time.Second)

	n3 := c.node(3)
	n3.start()
	if _, ok := n3.current().waitLine(time.Minute, func(l logLine) bool { return l.Msg == "the cluster added this node" }); !ok {
		t.Fatalf("node 3, started after the others founded the cluster, was not replaced\n%s", n3.current().tail(40))
	}
	n3.waitReady(readyTimeout)
	waitMembers(t, c.node(1), 1, 2, 3)
	loadFor(2 * time.Second)

	host := c.opts.hosts[0][:strings.LastIndex(c.opts.hosts[0], ".")+1] + "4"
	n4 := &node{t: t, id: 4, host: host, dataDir: filepath.Join(t.TempDir(), "node4")}
	n4.args = slices.Clone(c.node(1).args)
	for i, a := range n4.args {
		switch a {
		case c.node(1).grpcAddr():
			n4.args[i] = n4.grpcAddr()
		case c.node(1).metricsAddr():
			n4.args[i] = n4.metricsAddr()
		case c.node(1).raftAddr():
			n4.args[i] = n4.raftAddr()
		case c.node(1).dataDir:
			n4.args[i] = n4.dataDir
		case "1":
			if n4.args[i-1] == "--node-id" {
				n4.args[i] = "4"
			}
		}
	}
	c.nodes = append(c.nodes, n4)
	t.Cleanup(n4.cleanup)
	n4.start()
	n4.waitReady(readyTimeout)
	if resp := waitMembers(t, c.node(2), 1, 2, 3, 4); resp.GetNodes()[3].GetReplicas() != 6 {
		t.Fatalf("node 4 holds %d replicas, want 6 of 24", resp.GetNodes()[3].GetReplicas())
	}
	loadFor(2 * time.Second)

	if out, code := runCLI(t, "cluster", "remove-node", "--server", c.node(1).grpcAddr(), "--node-id", "4",
		"--timeout", membershipTimeout.String()); code != 0 {
		t.Fatalf("remove-node: exit %d\n%s", code, out)
	}
	waitMembers(t, c.node(3), 1, 2, 3)
	n4.terminate()
	loadFor(2 * time.Second)
	w.finish()
	for k, v := range w.stats.failures {
		if !strings.Contains(k, "NOT_COORDINATOR") && !strings.Contains(k, "COORDINATOR_NOT_AVAILABLE") &&
			!strings.Contains(k, "COORDINATOR_LOAD_IN_PROGRESS") && !strings.Contains(k, "Unavailable") && !strings.Contains(k, "DeadlineExceeded") {
			t.Errorf("%d calls failed with %s, which a client does not retry", v, k)
		}
	}
}
