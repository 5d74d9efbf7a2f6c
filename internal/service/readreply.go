package service

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/shard"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// A read response is built without protobuf messages for its state batches: a key may hold
// hundreds of thousands of them, and a *pb.StateBatch costs 72 bytes (the message and its pointer)
// where its encoding takes about 12. Each partition's batches are encoded, as the shard applies
// the read, straight into the bytes of field state_batches of its ReadStatePartitionResult,
// which are put in the result's unknown fields: marshalling the response copies them out as they
// are, after the fields the result knows, where state_batches (the last field) would be. A read
// therefore holds the encoded batches, then their copy in the marshalled response, which the
// transport holds until it is sent: about twice the response at most, counted in the server's
// response budget.

// Field numbers of the encoded messages (share_coordinator.proto); a test holds them to the
// descriptors.
const (
	fieldStateBatches  protowire.Number = 6 // ReadStatePartitionResult.state_batches
	fieldFirstOffset   protowire.Number = 1 // StateBatch.first_offset
	fieldLastOffset    protowire.Number = 2 // StateBatch.last_offset
	fieldDeliveryState protowire.Number = 3 // StateBatch.delivery_state
	fieldDeliveryCount protowire.Number = 4 // StateBatch.delivery_count
)

// roomWait is how long a read waits for room in the response budget before its partition is
// answered COORDINATOR_NOT_AVAILABLE, which share-partition leaders retry.
const roomWait = 500 * time.Millisecond

// readAttempts bounds how often one partition's read is applied again after waiting for room
// (its state may have grown in between).
const readAttempts = 3

// batchSize is the size of b encoded as a StateBatch message (proto3: zero fields are left out).
func batchSize(b shard.StateBatch) int {
	n := 0
	for _, v := range batchFields(b) {
		if v != 0 {
			n += 1 + protowire.SizeVarint(v)
		}
	}
	return n
}

// batchFields are b's four fields as varints (an int32 or int64 as protobuf encodes it).
func batchFields(b shard.StateBatch) [4]uint64 {
	return [4]uint64{uint64(b.FirstOffset), uint64(b.LastOffset), uint64(int64(b.DeliveryState)), uint64(int64(b.DeliveryCount))}
}

// batchesSize is the size of batches encoded as entries of field state_batches.
func batchesSize(batches []shard.StateBatch) int {
	n := 0
	for _, b := range batches {
		m := batchSize(b)
		n += 1 + protowire.SizeVarint(uint64(m)) + m
	}
	return n
}

// appendBatches appends batches encoded as entries of field state_batches, as proto.Marshal
// encodes them.
func appendBatches(out []byte, batches []shard.StateBatch) []byte {
	fields := [4]protowire.Number{fieldFirstOffset, fieldLastOffset, fieldDeliveryState, fieldDeliveryCount}
	for _, b := range batches {
		out = protowire.AppendTag(out, fieldStateBatches, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(batchSize(b)))
		for i, v := range batchFields(b) {
			if v != 0 {
				out = protowire.AppendTag(out, fields[i], protowire.VarintType)
				out = protowire.AppendVarint(out, v)
			}
		}
	}
	return out
}

// batchEncoder encodes one partition's batches as its read is applied (shard.ReadRequest.Take)
// and holds their bytes in the budget: twice their size, for the encoding and its copy in the
// marshalled response.
type batchEncoder struct {
	budget *responseBudget
	raw    []byte
	held   int64 // budget bytes held
	need   int64 // bytes the last refused take lacked; 0 after a take that went through
}

// take is the read's Take: on the shard's goroutine, it encodes the batches if the budget has
// room for them, and refuses the read otherwise.
func (e *batchEncoder) take(batches []shard.StateBatch) *shard.Result {
	n := batchesSize(batches)
	want := e.budget.clamp(2 * int64(n))
	switch {
	case want > e.held:
		if !e.budget.tryTake(want - e.held) {
			e.need = want - e.held
			return &shard.Result{Code: kafkaerr.CoordinatorNotAvailable, Message: msgNoRoom}
		}
		e.held = want
	case want < e.held:
		e.budget.release(e.held - want)
		e.held = want
	}
	e.need = 0
	if n > 0 {
		e.raw = appendBatches(make([]byte, 0, n), batches)
	}
	return nil
}

// drop gives back what the encoder holds: its read answered an error after all.
func (e *batchEncoder) drop() {
	e.budget.release(e.held)
	e.raw, e.held = nil, 0
}

// msgNoRoom answers a read refused for lack of room in the response budget.
const msgNoRoom = "The coordinator is not available: the read responses this server holds fill grpc.max.pending.response.bytes; retry the read."

// readPartition reads one partition of a read request into its result, with the key's batches
// encoded in the result's unknown fields; held receives the budget bytes it holds.
func (s *StateServer) readPartition(ctx context.Context, it item, p *pb.ReadStatePartition, held *atomic.Int64) *pb.ReadStatePartitionResult {
	r := shard.ReadResult{Result: it.bad}
	enc := batchEncoder{budget: s.budget}
	if it.bad.Code == kafkaerr.None {
		r = s.readWithRoom(ctx, it.key, p.GetLeaderEpoch(), &enc)
	}
	if r.Code != kafkaerr.None {
		enc.drop()
		r = shard.ReadResult{Result: r.Result, StartOffset: -1} // nothing known but the error
	}
	s.opts.Metrics.countOp(opRead, r.Code)
	res := &pb.ReadStatePartitionResult{
		Partition:    it.key.Partition,
		ErrorCode:    errorCode(r.Code),
		ErrorMessage: r.Message,
		StateEpoch:   r.StateEpoch,
		StartOffset:  r.StartOffset,
	}
	if len(enc.raw) > 0 {
		res.ProtoReflect().SetUnknown(enc.raw)
	}
	held.Add(enc.held)
	return res
}

// readWithRoom applies the read with enc as its Take; a read refused for lack of room waits for
// it (roomWait at most) and is applied again.
func (s *StateServer) readWithRoom(ctx context.Context, key shard.Key, leaderEpoch int32, enc *batchEncoder) shard.ReadResult {
	for attempt := 1; ; attempt++ {
		r := s.route(key).Read(ctx, shard.ReadRequest{Key: key, LeaderEpoch: leaderEpoch, Take: enc.take})
		if enc.need == 0 {
			return r
		}
		if attempt == readAttempts || !s.budget.take(ctx, enc.need, roomWait) {
			s.opts.Metrics.countReadRefused()
			s.warn.Warn("a read was refused: the read responses held fill grpc.max.pending.response.bytes (further refusals within 10 s are not logged; sharecoord_read_responses_refused_total counts them)",
				zap.Int64("grpc.max.pending.response.bytes", s.budget.capacity), zap.Int64("needed", enc.need),
				zap.String("peer.address", peerAddr(ctx)))
			return r
		}
		enc.held += enc.need
	}
}

// readReply is a ReadShareGroupState response as the gRPC server sends it (the server codec
// marshals it with marshal), with the budget bytes its encoded batches hold.
type readReply struct {
	resp   *pb.ReadShareGroupStateResponse
	budget *responseBudget
	held   int64 // budget bytes held
	raw    int64 // bytes of encoded batches in resp

	sendTimeout time.Duration
	stalled     func() // called when the marshalled response is not sent within sendTimeout

	once  sync.Once
	timer *time.Timer
}

// release gives back the reply's budget bytes, once.
func (r *readReply) release() {
	r.once.Do(func() {
		if r.timer != nil {
			r.timer.Stop()
		}
		r.budget.release(r.held)
	})
}

// marshal encodes the response for the transport. The encoded batches, which the marshalled
// response now copies, stop counting; the marshalled response counts until the transport has
// sent or dropped it (it returns the buffer to r, its pool), or until sendTimeout, when the
// connection is closed (stalled) and the bytes are given back: a client that does not read its
// responses, or does not open its flow-control window, holds them no longer.
func (r *readReply) marshal() (mem.BufferSlice, error) {
	out, err := proto.Marshal(r.resp)
	r.resp = nil
	if err != nil {
		r.release()
		return nil, err
	}
	if r.budget != nil && r.held > r.raw {
		r.budget.release(r.held - r.raw)
		r.held = r.raw
	}
	if r.raw == 0 || mem.IsBelowBufferPoolingThreshold(cap(out)) {
		r.release()
		return mem.BufferSlice{mem.SliceBuffer(out)}, nil
	}
	r.startTimer()
	return mem.BufferSlice{mem.NewBuffer(&out, r)}, nil
}

// startTimer arms the send timeout of a marshalled reply.
func (r *readReply) startTimer() {
	if r.sendTimeout <= 0 || r.stalled == nil {
		return
	}
	r.timer = time.AfterFunc(r.sendTimeout, func() {
		fired := false
		r.once.Do(func() { fired = true })
		if fired { // not sent, nor dropped, in time
			r.stalled()
			r.budget.release(r.held)
		}
	})
}

// Get implements mem.BufferPool; the transport does not ask a reply for buffers.
func (r *readReply) Get(length int) *[]byte {
	b := make([]byte, length)
	return &b
}

// Put implements mem.BufferPool: the transport is done with the marshalled response.
func (r *readReply) Put(*[]byte) { r.release() }

// response returns the reply as a plain message, its batches decoded into StateBatches, and
// gives back its budget bytes: for callers in the process, which get the message itself.
func (r *readReply) response() (*pb.ReadShareGroupStateResponse, error) {
	defer r.release()
	for _, t := range r.resp.GetResults() {
		for _, p := range t.GetPartitions() {
			raw := p.ProtoReflect().GetUnknown()
			if len(raw) == 0 {
				continue
			}
			p.ProtoReflect().SetUnknown(nil)
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(raw, p); err != nil {
				return nil, fmt.Errorf("decode the state batches of partition %d: %w", p.GetPartition(), err)
			}
		}
	}
	return r.resp, nil
}

// stateServiceDesc is ShareCoordinatorService's description with ReadShareGroupState answered
// by a readReply, which the server codec sends without building a message per state batch.
func stateServiceDesc(state pb.ShareCoordinatorServiceServer) *grpc.ServiceDesc {
	s, ok := state.(*StateServer)
	if !ok {
		return &pb.ShareCoordinatorService_ServiceDesc
	}
	desc := pb.ShareCoordinatorService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		if desc.Methods[i].MethodName == "ReadShareGroupState" {
			desc.Methods[i].Handler = s.readHandler
		}
	}
	return &desc
}

// readHandler is the generated ReadShareGroupState handler, answering with a readReply.
func (s *StateServer) readHandler(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(pb.ReadShareGroupStateRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	handler := func(ctx context.Context, req any) (any, error) {
		r, err := s.readState(ctx, req.(*pb.ReadShareGroupStateRequest))
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	if interceptor == nil {
		return handler(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: s, FullMethod: pb.ShareCoordinatorService_ReadShareGroupState_FullMethodName}
	return interceptor(ctx, in, info, handler)
}
