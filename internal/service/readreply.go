package service

import (
	"context"
	"fmt"
	"runtime"
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

// The tags of the encoded fields: a state batch message (length-delimited), and its varints.
var (
	tagStateBatch    = byte(protowire.EncodeTag(fieldStateBatches, protowire.BytesType))
	tagFirstOffset   = byte(protowire.EncodeTag(fieldFirstOffset, protowire.VarintType))
	tagLastOffset    = byte(protowire.EncodeTag(fieldLastOffset, protowire.VarintType))
	tagDeliveryState = byte(protowire.EncodeTag(fieldDeliveryState, protowire.VarintType))
	tagDeliveryCount = byte(protowire.EncodeTag(fieldDeliveryCount, protowire.VarintType))
)

// batchSize is the size of b encoded as a StateBatch message (proto3: zero fields are left out;
// an int32 or int64 is its two's complement as a varint). It is 44 bytes at most, so that the
// message's length takes one byte.
func batchSize(b shard.StateBatch) int {
	n := 0
	if b.FirstOffset != 0 {
		n += 1 + protowire.SizeVarint(uint64(b.FirstOffset))
	}
	if b.LastOffset != 0 {
		n += 1 + protowire.SizeVarint(uint64(b.LastOffset))
	}
	if b.DeliveryState != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(b.DeliveryState)))
	}
	if b.DeliveryCount != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(b.DeliveryCount)))
	}
	return n
}

// batchesSize is the size of batches encoded as entries of field state_batches.
func batchesSize(batches []shard.StateBatch) int {
	n := 2 * len(batches) // each entry's tag and length
	for _, b := range batches {
		n += batchSize(b)
	}
	return n
}

// appendBatches appends batches encoded as entries of field state_batches, the bytes
// proto.Marshal gives them. It writes in place, into the room it makes once: a read of a large
// state runs it on the shard's goroutine.
func appendBatches(out []byte, batches []shard.StateBatch) []byte {
	i := len(out)
	out = slices.Grow(out, batchesSize(batches))
	out = out[:cap(out)]
	for _, b := range batches {
		out[i], out[i+1] = tagStateBatch, byte(batchSize(b))
		i += 2
		if b.FirstOffset != 0 {
			out[i] = tagFirstOffset
			i = putVarint(out, i+1, uint64(b.FirstOffset))
		}
		if b.LastOffset != 0 {
			out[i] = tagLastOffset
			i = putVarint(out, i+1, uint64(b.LastOffset))
		}
		if b.DeliveryState != 0 {
			out[i] = tagDeliveryState
			i = putVarint(out, i+1, uint64(int64(b.DeliveryState)))
		}
		if b.DeliveryCount != 0 {
			out[i] = tagDeliveryCount
			i = putVarint(out, i+1, uint64(int64(b.DeliveryCount)))
		}
	}
	return out[:i]
}

// putVarint writes v as a varint at out[i:] and returns the index after it.
func putVarint(out []byte, i int, v uint64) int {
	for v >= 0x80 {
		out[i] = byte(v) | 0x80
		v >>= 7
		i++
	}
	out[i] = byte(v)
	return i + 1
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
// room for them, and refuses the read otherwise. Room is asked for by an estimate that takes no
// pass over the batches (sizeBound), so that the reads the budget refuses cost the shard little;
// once they are encoded, the bytes held are their exact size.
func (e *batchEncoder) take(batches []shard.StateBatch) *shard.Result {
	if !e.hold(2 * int64(sizeBound(batches))) {
		return &shard.Result{Code: kafkaerr.CoordinatorNotAvailable, Message: msgNoRoom}
	}
	n := batchesSize(batches)
	if !e.hold(2 * int64(n)) { // beyond the bound: batches the shard keeps out of order
		return &shard.Result{Code: kafkaerr.CoordinatorNotAvailable, Message: msgNoRoom}
	}
	e.need = 0
	if n > 0 {
		e.raw = appendBatches(make([]byte, 0, n), batches)
	}
	if exact := e.budget.clamp(2 * int64(n)); exact < e.held {
		e.budget.release(e.held - exact)
		e.held = exact
	}
	return nil
}

// hold makes the encoder hold at least n budget bytes (clamped), taking what it lacks if it is
// free; else it records what it lacks in need.
func (e *batchEncoder) hold(n int64) bool {
	want := e.budget.clamp(n)
	if want <= e.held {
		return true
	}
	if !e.budget.tryTake(want - e.held) {
		e.need = want - e.held
		return false
	}
	e.held = want
	return true
}

// sizeBound bounds, without a pass over them, the encoded size of batches as the shard keeps
// them: in offset order, offsets at least 0, delivery states of one byte and counts below 2^15.
func sizeBound(batches []shard.StateBatch) int {
	if len(batches) == 0 {
		return 0
	}
	last := batches[len(batches)-1]
	offset := 1 + protowire.SizeVarint(uint64(max(last.FirstOffset, last.LastOffset)))
	return len(batches) * (2 + 2*offset + 2 + 4) // tag and length, two offsets, state, count
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
// sent or dropped it (it returns the buffer to r, its pool, or lets it be collected), or until
// sendTimeout, when the connection is closed (stalled) and the bytes are given back: a client
// that does not read its responses, or does not open its flow-control window, holds them no
// longer.
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
	// Should the transport drop the buffer without returning it (its connection gone while the
	// buffer was being written, say), the bytes are given back once it is collected.
	runtime.AddCleanup(&out[0], (*readReply).release, r)
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
