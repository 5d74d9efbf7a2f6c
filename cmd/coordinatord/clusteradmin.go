package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/cluster"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// maxTransferWait bounds how long TransferLeader waits for the leadership to move.
const maxTransferWait = 30 * time.Second

// clusterAdmin serves ClusterService over a cluster node; a single node (node nil) answers
// FAILED_PRECONDITION.
type clusterAdmin struct {
	pb.UnimplementedClusterServiceServer
	node *cluster.Node
}

var errSingleNode = status.Error(codes.FailedPrecondition,
	"this server runs as a single node (no --initial-cluster): ClusterService needs cluster mode")

func (a *clusterAdmin) ListNodes(context.Context, *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	if a.node == nil {
		return nil, errSingleNode
	}
	resp := &pb.ListNodesResponse{AnsweredBy: int32(a.node.NodeID()), Partitions: int32(a.node.Partitions())}
	for _, st := range a.node.Nodes() {
		n := &pb.ClusterNode{
			NodeId: int32(st.ID), GrpcAddress: st.GRPCAddress, RaftAddress: st.RaftAddress,
			LastContactMs: -1, Replicas: int32(st.Replicas), Leaders: int32(st.Leaders),
			Membership: string(st.Membership), Moving: int32(st.Moving),
		}
		if st.LastContact >= 0 {
			n.LastContactMs = st.LastContact.Milliseconds()
		}
		switch st.State {
		case cluster.PeerSelf:
			n.State = pb.ClusterNodeState_CLUSTER_NODE_STATE_SELF
		case cluster.PeerUp:
			n.State = pb.ClusterNodeState_CLUSTER_NODE_STATE_UP
		case cluster.PeerUnreachable:
			n.State = pb.ClusterNodeState_CLUSTER_NODE_STATE_UNREACHABLE
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp, nil
}

func (a *clusterAdmin) TransferLeader(ctx context.Context, req *pb.TransferLeaderRequest) (*pb.TransferLeaderResponse, error) {
	if a.node == nil {
		return nil, errSingleNode
	}
	if req.GetNodeId() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "node_id %d: want a node id ≥ 1, or 0 to clear the preference", req.GetNodeId())
	}
	ctx, cancel := context.WithTimeout(ctx, maxTransferWait)
	defer cancel()
	leader, err := a.node.TransferLeader(ctx, int(req.GetPartition()), uint64(req.GetNodeId()))
	switch {
	case err == nil:
		return &pb.TransferLeaderResponse{LeaderNodeId: int32(leader)}, nil
	case errors.Is(err, cluster.ErrNoSuchPartition), errors.Is(err, cluster.ErrNotAReplica):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	default:
		return nil, transientStatus(err)
	}
}

func (a *clusterAdmin) AddNode(ctx context.Context, req *pb.AddNodeRequest) (*pb.AddNodeResponse, error) {
	if a.node == nil {
		return nil, errSingleNode
	}
	if req.GetNodeId() < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "node_id %d: want a node id ≥ 1", req.GetNodeId())
	}
	id, err := a.node.AddNode(ctx, uint64(req.GetNodeId()), req.GetRaftAddress(), req.GetReplace())
	if err != nil {
		return nil, membershipStatus(err)
	}
	return &pb.AddNodeResponse{MetadataReplicaId: id}, nil
}

func (a *clusterAdmin) RemoveNode(ctx context.Context, req *pb.RemoveNodeRequest) (*pb.RemoveNodeResponse, error) {
	if a.node == nil {
		return nil, errSingleNode
	}
	if req.GetNodeId() < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "node_id %d: want a node id ≥ 1", req.GetNodeId())
	}
	if err := a.node.RemoveNode(ctx, uint64(req.GetNodeId())); err != nil {
		return nil, membershipStatus(err)
	}
	return &pb.RemoveNodeResponse{}, nil
}

// ImportRecords copies a chunk of a single-node state log into a partition this node leads.
func (a *clusterAdmin) ImportRecords(ctx context.Context, req *pb.ImportRecordsRequest) (*pb.ImportRecordsResponse, error) {
	if a.node == nil {
		return nil, errSingleNode
	}
	res, err := a.node.ImportRecords(ctx, int(req.GetPartition()), req.GetStartOffset(), req.GetOffset(), req.GetRecords())
	var nl *cluster.NotLeaderError
	switch {
	case err == nil:
		return &pb.ImportRecordsResponse{Appended: res.Appended, StartOffset: res.StartOffset, EndOffset: res.EndOffset}, nil
	case errors.Is(err, cluster.ErrNoSuchPartition), errors.Is(err, cluster.ErrBadImport):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &nl) && nl.Leader.State != cluster.CoordinatorElecting && nl.Leader.Address != "":
		return nil, notLeaderStatus(nl)
	default:
		return nil, transientStatus(err)
	}
}

// notLeaderStatus is FAILED_PRECONDITION naming the partition's leader in an ErrorInfo, for the
// caller to ask it instead.
func notLeaderStatus(nl *cluster.NotLeaderError) error {
	st := status.New(codes.FailedPrecondition, nl.Error())
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonNotLeader, Domain: errorDomain, Metadata: map[string]string{
		"leader_node_id": strconv.FormatUint(nl.Leader.Node, 10), "leader_address": nl.Leader.Address,
	}}); err == nil {
		st = d
	}
	return st.Err()
}

// The ErrorInfo of an ImportRecords call made of a node that does not lead the partition.
const (
	ReasonNotLeader = "NOT_LEADER"
	errorDomain     = "coordinatord"
)

// transientStatus is the status of a call that may succeed later: the deadline, a cancellation,
// or UNAVAILABLE for the rest (no leader yet, a proposal not committed).
func transientStatus(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return status.Error(codes.Unavailable, err.Error())
	}
}

// membershipStatus is the gRPC status of a membership change that failed.
func membershipStatus(err error) error {
	switch {
	case errors.Is(err, cluster.ErrNotMember):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, cluster.ErrNotFormed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, cluster.ErrMembership):
		return status.Error(codes.FailedPrecondition, err.Error())
	default:
		return transientStatus(err)
	}
}
