package service

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// The hand-encoded batches are the bytes proto.Marshal gives the same batches, field numbers
// included, for any values (zero ones are left out, negative ones take ten bytes).
func TestEncodedBatchesAreProtobufs(t *testing.T) {
	fields := (&pb.StateBatch{}).ProtoReflect().Descriptor().Fields()
	for num, name := range map[protowire.Number]protoreflect.Name{
		fieldFirstOffset: "first_offset", fieldLastOffset: "last_offset",
		fieldDeliveryState: "delivery_state", fieldDeliveryCount: "delivery_count",
	} {
		if f := fields.ByName(name); f == nil || f.Number() != num {
			t.Fatalf("StateBatch.%s is not field %d", name, num)
		}
	}
	if f := (&pb.ReadStatePartitionResult{}).ProtoReflect().Descriptor().Fields().ByName("state_batches"); f == nil || f.Number() != fieldStateBatches {
		t.Fatalf("ReadStatePartitionResult.state_batches is not field %d", fieldStateBatches)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...int64) int64 { return vals[rng.IntN(len(vals))] }
	for range 200 {
		batches := make([]shard.StateBatch, rng.IntN(20))
		for i := range batches {
			batches[i] = shard.StateBatch{
				FirstOffset:   pick(0, 1, 127, 128, rng.Int64(), math.MaxInt64, -1),
				LastOffset:    pick(0, 300, rng.Int64(), math.MinInt64),
				DeliveryState: int8(pick(0, 1, 2, 4, -1, math.MaxInt8)),
				DeliveryCount: int16(pick(0, 1, 200, math.MaxInt16, -5)),
			}
		}
		msg := &pb.ReadStatePartitionResult{}
		for _, b := range batches {
			msg.StateBatches = append(msg.StateBatches, &pb.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
				DeliveryState: int32(b.DeliveryState), DeliveryCount: int32(b.DeliveryCount)})
		}
		want, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		got := appendBatches(nil, batches)
		if !bytes.Equal(got, want) || batchesSize(batches) != len(want) {
			t.Fatalf("batches %v: encoded %x (size %d), proto.Marshal %x", batches, got, batchesSize(batches), want)
		}
	}
}

// bigKey initializes group g's key on topicA partition 0 and writes n disjoint batches to it.
func bigKey(t *testing.T, ts *testServer, n int) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := ts.state.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	batches := make([]*pb.StateBatch, n)
	for i := range batches {
		batches[i] = &pb.StateBatch{FirstOffset: int64(2 * i), LastOffset: int64(2 * i), DeliveryState: 2, DeliveryCount: 1}
	}
	w, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 1, 0, 0, batches...))
	if err != nil || w.Results[0].Partitions[0].ErrorCode != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("write %d batches: %v %v", n, w, err)
	}
}

// serverRead runs a read as the gRPC server does, from the request to the bytes the transport
// sends, and returns their size; the transport is then done with them.
func serverRead(t testing.TB, s *StateServer, req *pb.ReadShareGroupStateRequest) int {
	r, err := s.readState(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := newCodec().Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	n := out.Len()
	out.Free()
	return n
}

// A read of a large state costs the server about its response twice (the encoded batches and
// the marshalled response), not a message per batch.
func TestReadCostsAtMostTwiceItsResponse(t *testing.T) {
	ts := startServer(t, testOptions{partitions: 1})
	bigKey(t, ts, 100_000)
	req := readReq("g", topicA, 0, 1)
	size := serverRead(t, ts.stateSrv, req)
	const runs = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		serverRead(t, ts.stateSrv, req)
	}
	runtime.ReadMemStats(&after)
	perRead := float64(after.TotalAlloc-before.TotalAlloc) / runs
	t.Logf("response %d bytes, %.0f bytes allocated per read (%.2f times)", size, perRead, perRead/float64(size))
	if perRead > 2.2*float64(size) {
		t.Fatalf("a read of a %d-byte response allocates %.0f bytes, more than 2.2 times its response", size, perRead)
	}
	if got := ts.stateSrv.budget.inUseBytes(); got != 0 {
		t.Fatalf("%d budget bytes still held after the reads", got)
	}
}

func BenchmarkReadLargeState(b *testing.B) {
	for _, n := range []int{100, 10_000, 262_000} {
		b.Run("batches="+strconv.Itoa(n), func(b *testing.B) {
			s := shard.Open(nil, oneLimit{}, shard.Options{Partition: 0}, shard.NewLocalLog(nil, filepath.Join(b.TempDir(), "0"), statelog.Options{}))
			defer func() { _ = s.Close() }()
			if err := s.WaitLoaded(context.Background()); err != nil {
				b.Fatal(err)
			}
			st := NewStateServer([]Partition{s}, StateOptions{})
			ctx := context.Background()
			if _, err := st.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 1, 0)); err != nil {
				b.Fatal(err)
			}
			batches := make([]*pb.StateBatch, n)
			for i := range batches {
				batches[i] = &pb.StateBatch{FirstOffset: int64(2 * i), LastOffset: int64(2 * i), DeliveryState: 2, DeliveryCount: 1}
			}
			if _, err := st.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 1, 0, 0, batches...)); err != nil {
				b.Fatal(err)
			}
			req := readReq("g", topicA, 0, 1)
			b.SetBytes(int64(serverRead(b, st, req)))
			b.ReportAllocs()
			for b.Loop() {
				serverRead(b, st, req)
			}
		})
	}
}

// oneLimit gives every group the snapshot limit 500.
type oneLimit struct{}

func (oneLimit) SnapshotUpdateRecordsPerSnapshot(string) int { return 500 }

// A read that finds no room in the response budget waits for it briefly, then its partition is
// answered COORDINATOR_NOT_AVAILABLE and changes nothing; room freed meanwhile lets it through.
func TestReadWaitsForRoomInTheBudget(t *testing.T) {
	ts := startServer(t, testOptions{partitions: 1, state: func(o *StateOptions) { o.ResponseBytes = 1 << 20 }})
	bigKey(t, ts, 1000)
	ctx := ctxT(t)
	budget := ts.stateSrv.budget
	if !budget.tryTake(budget.capacity) {
		t.Fatal("the budget is not free")
	}
	start := time.Now()
	r, err := ts.state.ReadShareGroupState(ctx, readReq("g", topicA, 0, 7))
	if err != nil {
		t.Fatal(err)
	}
	p := r.Results[0].Partitions[0]
	if p.ErrorCode != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE || !strings.Contains(p.ErrorMessage, "grpc.max.pending.response.bytes") {
		t.Fatalf("read with a full budget: %v", p)
	}
	if waited := time.Since(start); waited < roomWait {
		t.Fatalf("refused after %v, before waiting %v for room", waited, roomWait)
	}
	if got := testutil.ToFloat64(ts.metrics.readsRefused); got != 1 {
		t.Fatalf("sharecoord_read_responses_refused_total %v, want 1", got)
	}
	// The refused read raised no leader epoch: a write of leader epoch 1 is not fenced.
	if w, err := ts.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 1, 1, 0)); err != nil || w.Results[0].Partitions[0].ErrorCode != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("write after the refused read: %v %v", w, err)
	}

	done := make(chan *pb.ReadShareGroupStateResponse, 1)
	go func() {
		r, _ := ts.state.ReadShareGroupState(ctx, readReq("g", topicA, 0, 7))
		done <- r
	}()
	for budget.waiting() == 0 {
		runtime.Gosched()
	}
	budget.release(budget.capacity)
	r = <-done
	if p := r.GetResults()[0].GetPartitions()[0]; p.ErrorCode != pb.ErrorCode_ERROR_CODE_NONE || len(p.StateBatches) != 1000 {
		t.Fatalf("read once room was freed: code %v, %d batches", p.ErrorCode, len(p.StateBatches))
	}
	if got := budget.inUseBytes(); got != 0 {
		t.Fatalf("%d budget bytes still held after the read", got)
	}
}

// stalledReads opens a connection to addr whose client lets the server send at most 64 KiB per
// call, and starts n reads on it that it never receives: a client that does not read its
// responses. It returns the connection.
func stalledReads(t *testing.T, addr string, req *pb.ReadShareGroupStateRequest, n int) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	desc := &grpc.StreamDesc{StreamName: "ReadShareGroupState", ServerStreams: true}
	for range n {
		st, err := conn.NewStream(ctx, desc, pb.ShareCoordinatorService_ReadShareGroupState_FullMethodName)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(req); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// A client that does not read its responses holds no more than the budget, other clients' small
// reads go on being served meanwhile, and once connections.send.timeout.ms passes its connection is
// closed and the budget is free again.
func TestUnreadResponsesAreBoundedAndDropped(t *testing.T) {
	const budgetBytes = 4 << 20
	ts := startServer(t, testOptions{partitions: 2, state: func(o *StateOptions) {
		o.ResponseBytes, o.SendTimeout = budgetBytes, 2*time.Second
	}})
	bigKey(t, ts, 100_000) // a read of it: about 1.3 MB
	ctx := ctxT(t)
	small := initReq("small", topicB, 3, 1, 0)
	if _, err := ts.state.InitializeShareGroupState(ctx, small); err != nil {
		t.Fatal(err)
	}
	stalledReads(t, ts.lis.Addr().String(), readReq("g", topicA, 0, 1), 20)

	budget := ts.stateSrv.budget
	for budget.inUseBytes() < budgetBytes/2 {
		runtime.Gosched()
	}
	var slowest time.Duration
	for range 20 {
		start := time.Now()
		r, err := ts.state.ReadShareGroupState(ctx, readReq("small", topicB, 3, 1))
		if err != nil || r.Results[0].Partitions[0].ErrorCode != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("a small read while responses stall: %v %v", r, err)
		}
		slowest = max(slowest, time.Since(start))
		if held := budget.inUseBytes(); held > budgetBytes {
			t.Fatalf("%d bytes held, past the budget of %d", held, budgetBytes)
		}
	}
	if slowest > time.Second {
		t.Fatalf("the slowest small read took %v while responses stalled", slowest)
	}
	deadline := time.Now().Add(20 * time.Second)
	for budget.inUseBytes() != 0 || testutil.ToFloat64(ts.metrics.stalled) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held, %v stalled responses, long past the send timeout", budget.inUseBytes(), testutil.ToFloat64(ts.metrics.stalled))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The stalled client's connection is gone; the server serves large reads again.
	r, err := ts.state.ReadShareGroupState(ctx, readReq("g", topicA, 0, 1))
	if err != nil || len(r.Results[0].Partitions[0].StateBatches) != 100_000 {
		t.Fatalf("a large read after the stalled client was dropped: %v", err)
	}
	if got := ts.lis.Open(); got != 1 {
		t.Fatalf("%d connections open, want only the test client's", got)
	}
}

// A marshalled response that the transport drops without giving its buffer back (its
// connection gone in the middle of a write, say) gives its budget bytes back once collected,
// with no send timeout to do it.
func TestDroppedResponseGivesItsBytesBack(t *testing.T) {
	ts := startServer(t, testOptions{partitions: 1, state: func(o *StateOptions) { o.ResponseBytes = 64 << 20 }})
	bigKey(t, ts, 10_000)
	budget := ts.stateSrv.budget
	func() {
		r, err := ts.stateSrv.readState(context.Background(), readReq("g", topicA, 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		out, err := newCodec().Marshal(r)
		if err != nil || out.Len() == 0 {
			t.Fatal(out.Len(), err)
		}
		if budget.inUseBytes() == 0 {
			t.Fatal("a marshalled response holds no budget bytes")
		}
	}() // out is dropped here without Free
	for deadline := time.Now().Add(10 * time.Second); budget.inUseBytes() != 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d budget bytes still held by a dropped response", budget.inUseBytes())
		}
		runtime.GC()
	}
}
