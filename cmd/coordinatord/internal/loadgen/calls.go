package loadgen

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// initChunk is the number of share partitions per InitializeShareGroupState call.
const initChunk = 100

// healthCaller sends the baseline: grpc.health.v1.Health/Check for the overall status.
type healthCaller struct {
	client healthpb.HealthClient
	req    *healthpb.HealthCheckRequest
}

func newHealthCaller(conn *grpc.ClientConn) *healthCaller {
	return &healthCaller{client: healthpb.NewHealthClient(conn), req: &healthpb.HealthCheckRequest{}}
}

func (h *healthCaller) call(ctx context.Context) string {
	resp, err := h.client.Check(ctx, h.req)
	if err != nil {
		return status.Code(err).String()
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return resp.GetStatus().String()
	}
	return ""
}

// stateClient is what the write phase calls: a connection's generated client, or the client
// package's routing Client (Config.Cluster).
type stateClient interface {
	InitializeShareGroupState(context.Context, *pb.InitializeShareGroupStateRequest) (*pb.InitializeShareGroupStateResponse, error)
	WriteShareGroupState(context.Context, *pb.WriteShareGroupStateRequest) (*pb.WriteShareGroupStateResponse, error)
}

// connClient is a stateClient over one connection.
type connClient struct {
	c pb.ShareCoordinatorServiceClient
}

func (c connClient) InitializeShareGroupState(ctx context.Context, r *pb.InitializeShareGroupStateRequest) (*pb.InitializeShareGroupStateResponse, error) {
	return c.c.InitializeShareGroupState(ctx, r)
}

func (c connClient) WriteShareGroupState(ctx context.Context, r *pb.WriteShareGroupStateRequest) (*pb.WriteShareGroupStateResponse, error) {
	return c.c.WriteShareGroupState(ctx, r)
}

// writeSet is the set of share partitions the write phase writes, shared by its callers. Calls
// take the partitions in turn (round-robin over all callers), and the next start offset of each
// partition atomically, so callers sharing a partition write disjoint, advancing ranges.
type writeSet struct {
	cfg  Config
	turn atomic.Uint64
	next []atomic.Int64
}

// newWriteSet initializes cfg.Keys share partitions (state epoch 1, start offset 0), so that the
// writes find state to update; running a test twice against one server re-initializes them.
func newWriteSet(ctx context.Context, client stateClient, cfg Config) (*writeSet, error) {
	for lo := 0; lo < cfg.Keys; lo += initChunk {
		hi := min(lo+initChunk, cfg.Keys)
		parts := make([]*pb.InitializeStatePartition, 0, hi-lo)
		for k := lo; k < hi; k++ {
			parts = append(parts, &pb.InitializeStatePartition{Partition: int32(k), StateEpoch: 1, StartOffset: 0})
		}
		resp, err := client.InitializeShareGroupState(ctx, &pb.InitializeShareGroupStateRequest{
			GroupId: cfg.GroupID,
			Topics:  []*pb.InitializeStateTopic{{TopicId: cfg.TopicID, Partitions: parts}},
		})
		if err != nil {
			return nil, fmt.Errorf("initialize share partitions %d..%d: %w", lo, hi-1, err)
		}
		for _, t := range resp.GetResults() {
			for _, p := range t.GetPartitions() {
				if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
					return nil, fmt.Errorf("initialize share partition %d: %s: %s", p.GetPartition(), codeName(p.GetErrorCode()), p.GetErrorMessage())
				}
			}
		}
	}
	return &writeSet{cfg: cfg, next: make([]atomic.Int64, cfg.Keys)}, nil
}

// caller returns a caller sending through client.
func (s *writeSet) caller(client stateClient) *writeCaller {
	batches := make([]*pb.StateBatch, s.cfg.BatchesPerWrite)
	for i := range batches {
		batches[i] = &pb.StateBatch{DeliveryCount: 1}
	}
	dcc := int32(0)
	part := &pb.WriteStatePartition{StateEpoch: 1, LeaderEpoch: 1, StateBatches: batches, DeliveryCompleteCount: &dcc}
	return &writeCaller{
		set:    s,
		client: client,
		part:   part,
		req: &pb.WriteShareGroupStateRequest{
			GroupId: s.cfg.GroupID,
			Topics:  []*pb.WriteStateTopic{{TopicId: s.cfg.TopicID, Partitions: []*pb.WriteStatePartition{part}}},
		},
	}
}

// writeCaller sends WriteShareGroupState for one share partition per call. It reuses its request:
// a unary call has marshalled it by the time it returns.
type writeCaller struct {
	set    *writeSet
	client stateClient
	part   *pb.WriteStatePartition
	req    *pb.WriteShareGroupStateRequest
}

func (c *writeCaller) call(ctx context.Context) string {
	key := int((c.set.turn.Add(1) - 1) % uint64(len(c.set.next)))
	span := int64(len(c.part.StateBatches) * workload.OffsetsPerBatch)
	base := c.set.next[key].Add(span) - span
	c.part.Partition = int32(key)
	c.part.StartOffset = base
	*c.part.DeliveryCompleteCount = int32(span / 2)
	for i, b := range c.part.StateBatches {
		b.FirstOffset = base + int64(i*workload.OffsetsPerBatch)
		b.LastOffset = b.FirstOffset + workload.OffsetsPerBatch - 1
		b.DeliveryState = 2 + 2*int32(i%2) // acknowledged, archived, ...: neighbours do not merge
	}
	resp, err := c.client.WriteShareGroupState(ctx, c.req)
	if err != nil {
		return status.Code(err).String()
	}
	for _, t := range resp.GetResults() {
		for _, p := range t.GetPartitions() {
			if p.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				return codeName(p.GetErrorCode())
			}
		}
	}
	return ""
}

// codeName is a Kafka error code's name without the enum prefix.
func codeName(c pb.ErrorCode) string {
	return strings.TrimPrefix(c.String(), "ERROR_CODE_")
}
