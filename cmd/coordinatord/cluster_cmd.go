package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
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
		Short: "Operate a cluster: list its nodes, move a state partition's leadership",
		Long: "The cluster subcommands call ClusterService (sharecoord.v1) on the node at --server, any node of\n" +
			"the cluster. With authorization on, list-nodes needs the describe_configs permission and\n" +
			"transfer-leader the alter_cluster permission.",
		Args: args(cobra.NoArgs),
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.server, "server", "127.0.0.1:7070", "gRPC address of a node of the cluster")
	pf.DurationVar(&f.timeout, "timeout", 40*time.Second, "deadline of the call")
	f.tls.register(pf, "--server")
	cmd.AddCommand(newListNodesCommand(e, f), newTransferLeaderCommand(e, f))
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
	fmt.Fprintln(w, "NODE\tGRPC\tRAFT\tSTATE\tLAST CONTACT\tREPLICAS\tLEADERS")
	for _, n := range resp.GetNodes() {
		contact := "-"
		if ms := n.GetLastContactMs(); ms >= 0 && n.GetState() != pb.ClusterNodeState_CLUSTER_NODE_STATE_SELF {
			contact = (time.Duration(ms) * time.Millisecond).String()
		}
		state := strings.ToLower(strings.TrimPrefix(n.GetState().String(), "CLUSTER_NODE_STATE_"))
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", n.GetNodeId(), orDash(n.GetGrpcAddress()), n.GetRaftAddress(),
			state, contact, n.GetReplicas(), n.GetLeaders())
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
