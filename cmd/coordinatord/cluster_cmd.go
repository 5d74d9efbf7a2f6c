package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// clusterFlags are the flags every `cluster` subcommand shares.
type clusterFlags struct {
	server  string
	timeout time.Duration
	tls     clientTLS
}

// newClusterCommand is `coordinatord cluster`: the operator commands of cluster mode, which call
// ClusterService on any node.
func newClusterCommand(e env) *cobra.Command {
	f := &clusterFlags{}
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Operate a cluster: list, add and remove its nodes, move a state partition's leadership, import a single node's data",
		Long: "The cluster subcommands call ClusterService (sharecoord.v1) on the node at --server, any node of\n" +
			"the cluster. With authorization on, list-nodes needs the describe_configs permission;\n" +
			"transfer-leader, add-node, remove-node and import the alter_cluster permission (import also\n" +
			"alter_configs).",
		Args: args(cobra.NoArgs),
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.server, "server", "127.0.0.1:7070", "gRPC address of a node of the cluster")
	pf.DurationVar(&f.timeout, "timeout", 40*time.Second, "deadline of the call")
	f.tls.register(pf, "--server")
	cmd.AddCommand(newListNodesCommand(e, f), newTransferLeaderCommand(e, f), newAddNodeCommand(e, f), newRemoveNodeCommand(e, f), newImportCommand(e, f))
	return cmd
}

// call dials the server and runs fn with a ClusterService client within the timeout.
func (f *clusterFlags) call(ctx context.Context, fn func(context.Context, pb.ClusterServiceClient) error) error {
	opts, err := f.tls.dialOptions()
	if err != nil {
		return usageError{err}
	}
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(f.server, opts...)
	if err != nil {
		return usageError{fmt.Errorf("--server %s: %w", f.server, err)}
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := fn(ctx, pb.NewClusterServiceClient(conn)); err != nil {
		s := status.Convert(err)
		return fmt.Errorf("%s: %s: %s", f.server, s.Code(), s.Message())
	}
	return nil
}

func newListNodesCommand(e env, f *clusterFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list-nodes",
		Short: "List the cluster's nodes: addresses, state, replicas and leaderships",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.call(cmd.Context(), func(ctx context.Context, c pb.ClusterServiceClient) error {
				resp, err := c.ListNodes(ctx, &pb.ListNodesRequest{})
				if err != nil {
					return err
				}
				writeNodes(e, resp)
				return nil
			})
		},
	}
}

// writeNodes prints a ListNodes answer as a table.
func writeNodes(e env, resp *pb.ListNodesResponse) {
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tGRPC\tRAFT\tMEMBERSHIP\tSTATE\tLAST CONTACT\tREPLICAS\tMOVING\tLEADERS")
	for _, n := range resp.GetNodes() {
		contact := "-"
		if ms := n.GetLastContactMs(); ms >= 0 && n.GetState() != pb.ClusterNodeState_CLUSTER_NODE_STATE_SELF {
			contact = (time.Duration(ms) * time.Millisecond).String()
		}
		state := strings.ToLower(strings.TrimPrefix(n.GetState().String(), "CLUSTER_NODE_STATE_"))
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.GetNodeId(), orDash(n.GetGrpcAddress()), n.GetRaftAddress(),
			orDash(n.GetMembership()), state, contact, n.GetReplicas(), n.GetMoving(), n.GetLeaders())
	}
	_ = w.Flush()
	fmt.Fprintf(e.stdout, "%d state partitions; as node %d sees them\n", resp.GetPartitions(), resp.GetAnsweredBy())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newTransferLeaderCommand(e env, f *clusterFlags) *cobra.Command {
	var partition, node int32
	cmd := &cobra.Command{
		Use:   "transfer-leader --partition P --to NODE",
		Short: "Make a node the lasting preferred leader of a state partition, and wait until it leads it",
		Long: "transfer-leader records NODE as the preferred leader of state partition P (it must hold a\n" +
			"replica of it) and waits until it leads it. The preference is replicated and outlives\n" +
			"restarts: leaders are rebalanced to it after every change. --to 0 clears it.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("partition") || !cmd.Flags().Changed("to") {
				return usageError{fmt.Errorf("give both --partition and --to")}
			}
			return f.call(cmd.Context(), func(ctx context.Context, c pb.ClusterServiceClient) error {
				resp, err := c.TransferLeader(ctx, &pb.TransferLeaderRequest{Partition: partition, NodeId: node})
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "state partition %d is led by node %d\n", partition, resp.GetLeaderNodeId())
				return nil
			})
		},
	}
	cmd.Flags().Int32Var(&partition, "partition", 0, "the state partition")
	cmd.Flags().Int32Var(&node, "to", 0, "the node to lead it (0: clear the preference)")
	return cmd
}

func newAddNodeCommand(e env, f *clusterFlags) *cobra.Command {
	var node int32
	var raftAddress string
	var replace, wait bool
	cmd := &cobra.Command{
		Use:   "add-node --node-id N --raft-address HOST:PORT",
		Short: "Add a node to the cluster (or replace one that lost its data directory), and wait until it holds its replicas",
		Long: "add-node records the node in the cluster; start it with --join naming any node, and the\n" +
			"cluster adds its replicas (non-voting until caught up, then voters) and moves replicas onto\n" +
			"it until the nodes hold as many as each other. A node started with --join on an empty data\n" +
			"directory asks for this itself. --replace gives a member that lost its data directory new\n" +
			"replica ids (it must be stopped). With --wait (the default) the command returns once the\n" +
			"node is active and none of its replicas moves, or at --timeout.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node < 1 || raftAddress == "" {
				return usageError{fmt.Errorf("give --node-id (≥ 1) and --raft-address")}
			}
			return f.call(cmd.Context(), func(ctx context.Context, c pb.ClusterServiceClient) error {
				resp, err := c.AddNode(ctx, &pb.AddNodeRequest{NodeId: node, RaftAddress: raftAddress, Replace: replace})
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "node %d recorded (metadata replica %d); start it with --join\n", node, resp.GetMetadataReplicaId())
				if !wait {
					return nil
				}
				return waitNodes(ctx, e, c, func(n *pb.ClusterNode, ok bool) bool {
					return ok && n.GetMembership() == "active" && n.GetMoving() == 0
				}, node)
			})
		},
	}
	cmd.Flags().Int32Var(&node, "node-id", 0, "the node's id")
	cmd.Flags().StringVar(&raftAddress, "raft-address", "", "the node's replication address (its --raft-advertise)")
	cmd.Flags().BoolVar(&replace, "replace", false, "replace a member that lost its data directory")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the node is active and its replicas are in place")
	return cmd
}

func newRemoveNodeCommand(e env, f *clusterFlags) *cobra.Command {
	var node int32
	var wait bool
	cmd := &cobra.Command{
		Use:   "remove-node --node-id N",
		Short: "Remove a node: move its replicas and leaderships away, then drop it from the cluster",
		Long: "remove-node moves every replica of the node to the other nodes (each new one catches up\n" +
			"before the old one goes; its leaderships move first) and then drops the node. With --wait\n" +
			"(the default) the command returns once the node is no longer listed; its process can be\n" +
			"stopped then. The cluster keeps at least as many nodes as the replication factor.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node < 1 {
				return usageError{fmt.Errorf("give --node-id (≥ 1)")}
			}
			return f.call(cmd.Context(), func(ctx context.Context, c pb.ClusterServiceClient) error {
				if _, err := c.RemoveNode(ctx, &pb.RemoveNodeRequest{NodeId: node}); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "removal of node %d recorded\n", node)
				if !wait {
					return nil
				}
				return waitNodes(ctx, e, c, func(_ *pb.ClusterNode, ok bool) bool { return !ok }, node)
			})
		},
	}
	cmd.Flags().Int32Var(&node, "node-id", 0, "the node's id")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the node is no longer a member")
	return cmd
}

// waitNodes polls ListNodes until done holds for node (ok: it is listed), then prints the nodes.
func waitNodes(ctx context.Context, e env, c pb.ClusterServiceClient, done func(n *pb.ClusterNode, ok bool) bool, node int32) error {
	for {
		resp, err := c.ListNodes(ctx, &pb.ListNodesRequest{})
		if err == nil {
			var found *pb.ClusterNode
			for _, n := range resp.GetNodes() {
				if n.GetNodeId() == node {
					found = n
				}
			}
			if done(found, found != nil) {
				writeNodes(e, resp)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return status.Errorf(codes.DeadlineExceeded, "node %d: the change is still under way (see list-nodes): %v", node, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
