package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/cluster"
	"github.com/coordinatord/coordinatord/internal/datadir"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// joinRetry is how long a node that joins waits between rounds of asking the --join nodes.
const joinRetry = 2 * time.Second

// joinCluster decides how a cluster node with --join starts. A node whose data directory holds
// the Raft engine's state restarts with it (nil). Otherwise it asks the --join nodes, in turn, to
// replace it (the cluster knows its id: its data was lost, so it must come back under new replica
// ids) or else to add it, and starts with what the first to accept answered. A founding member
// (named in --initial-cluster) founds the cluster (nil) after a round in which no --join node
// knew a cluster, as on the founders' first start; a node that is no founder asks until one
// accepts, or until it is stopped.
func joinCluster(logger *zap.Logger, f *serveFlags, founders map[uint64]string, raftAddress, self string, sec *security) (*cluster.Join, error) {
	if f.join == "" || hasEngineState(f.dataDir) {
		return nil, nil
	}
	_, founder := founders[uint64(f.nodeID)]
	var targets []string
	for t := range strings.SplitSeq(f.join, ",") {
		if t = strings.TrimSpace(t); t != "" && t != self {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil, badConfig(fmt.Errorf("--join %q names no node other than this one (%s)", f.join, self))
	}
	for {
		known := false
		for _, t := range targets {
			id, err := askToJoin(t, f.nodeID, raftAddress, sec)
			if err == nil {
				logger.Info("the cluster added this node", zap.String("asked", t), zap.Uint64("metadata_replica", id))
				return &cluster.Join{MetaReplica: id}, nil
			}
			if status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.PermissionDenied {
				known = true
			}
			logger.Info("asking to join the cluster", zap.String("asked", t), zap.Error(err))
		}
		if founder && !known {
			logger.Info("no --join node knows a cluster yet: founding it with --initial-cluster")
			return nil, nil
		}
		time.Sleep(joinRetry)
	}
}

// hasEngineState reports whether the data directory holds the Raft engine's state.
func hasEngineState(dataDir string) bool {
	entries, err := os.ReadDir(datadir.RaftDir(dataDir))
	return err == nil && len(entries) > 0
}

// askToJoin asks the node at target to replace node id or, if it is no member, to add it.
func askToJoin(target string, id int32, raftAddress string, sec *security) (uint64, error) {
	creds := insecure.NewCredentials()
	if sec.peer != nil {
		host, _, _ := net.SplitHostPort(target)
		creds = credentials.NewTLS(sec.peer.ClientConfig(host, sec.minTLSVersion()))
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := pb.NewClusterServiceClient(conn)
	resp, err := c.AddNode(ctx, &pb.AddNodeRequest{NodeId: id, RaftAddress: raftAddress, Replace: true})
	if status.Code(err) == codes.NotFound {
		resp, err = c.AddNode(ctx, &pb.AddNodeRequest{NodeId: id, RaftAddress: raftAddress})
	}
	if err != nil {
		return 0, err
	}
	return resp.GetMetadataReplicaId(), nil
}
