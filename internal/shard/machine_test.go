package shard

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
)

var (
	testTopic = record.TopicID{0x3f, 0xa8, 0x5f, 0x64, 0x57, 0x17, 0x45, 0x62, 0xb3, 0xfc, 0x2c, 0x96, 0x3f, 0x66, 0xaf, 0xa6}
	testKey   = Key{GroupID: "group1", TopicID: testTopic, Partition: 0}
)

// initSharePartition replays the bare snapshot Kafka's tests start from.
func initSharePartition(h *harness, k Key, stateEpoch int32) {
	h.replay(record.Record{Type: record.TypeSnapshot, Key: record.Key(k), Snapshot: &record.SnapshotValue{StateEpoch: stateEpoch, LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: -1}})
}

// writeAndReplayRecord is Kafka's helper: a read claiming leaderEpoch, then a default write.
func writeAndReplayRecord(t *testing.T, h *harness, leaderEpoch int32) {
	t.Helper()
	rr := h.read(testKey, leaderEpoch)
	if rr.Code != kafkaerr.None {
		t.Fatalf("read: %+v", rr)
	}
	res := h.write(WriteRequest{Key: testKey, StartOffset: 0, DeliveryCompleteCount: 0, StateEpoch: rr.StateEpoch, LeaderEpoch: leaderEpoch,
		StateBatches: bs(sb(0, 10, 0, 1))})
	if res.Code != kafkaerr.None {
		t.Fatalf("write: %+v", res)
	}
	h.records()
}

func defaultWrite(le, se int32) WriteRequest {
	return WriteRequest{Key: testKey, StartOffset: 0, DeliveryCompleteCount: 11, StateEpoch: se, LeaderEpoch: le, StateBatches: bs(sb(0, 10, 0, 1))}
}

func TestReplayWithShareSnapshot(t *testing.T) {
	h := newHarness(t, 500)
	s1 := record.SnapshotValue{SnapshotEpoch: 0, StateEpoch: 0, StartOffset: 0, DeliveryCompleteCount: 11, LeaderEpoch: 1, StateBatches: bs(sb(0, 10, 0, 1))}
	s2 := record.SnapshotValue{SnapshotEpoch: 1, StateEpoch: 1, StartOffset: 0, DeliveryCompleteCount: 13, LeaderEpoch: 2, StateBatches: bs(sb(11, 12, 0, 1))}
	h.replay(record.Record{Type: record.TypeSnapshot, Key: record.Key(testKey), Snapshot: &s1})
	if v := h.m.view(testKey); !reflect.DeepEqual(v.Offset, s1) || v.MaxLeaderEpoch != 1 {
		t.Fatalf("after first snapshot: %+v", v)
	}
	h.replay(record.Record{Type: record.TypeSnapshot, Key: record.Key(testKey), Snapshot: &s2})
	if v := h.m.view(testKey); !reflect.DeepEqual(v.Offset, s2) || v.MaxLeaderEpoch != 2 || *v.MaxStateEpoch != 1 {
		t.Fatalf("after second snapshot: %+v", v)
	}
}

func TestWriteValidationAndFencing(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, h *harness)
		req   WriteRequest
		want  Result
	}{
		{"uninitialized", nil, defaultWrite(0, 0), invalid(msgWriteUninitialized)},
		{"negative partition", nil, func() WriteRequest { r := defaultWrite(0, 0); r.Key.Partition = -1; return r }(), invalid(msgNegativePartition)},
		{"negative leader epoch", nil, defaultWrite(-1, 0), invalid(msgNegativeLeader)},
		{"negative state epoch", nil, defaultWrite(0, -1), invalid(msgNegativeState)},
		{"negative partition is checked before the epochs", nil, func() WriteRequest { r := defaultWrite(-1, -1); r.Key.Partition = -1; return r }(), invalid(msgNegativePartition)},
		{"fenced leader epoch", func(t *testing.T, h *harness) { initSharePartition(h, testKey, 0); writeAndReplayRecord(t, h, 1) },
			defaultWrite(0, 0), withDefault(kafkaerr.FencedLeaderEpoch)},
		{"fenced state epoch", func(t *testing.T, h *harness) { initSharePartition(h, testKey, 1) },
			WriteRequest{Key: testKey, StartOffset: 0, DeliveryCompleteCount: 10, StateEpoch: 0, LeaderEpoch: 5, StateBatches: bs(sb(11, 20, 0, 1))},
			withDefault(kafkaerr.FencedStateEpoch)},
		{"leader epoch fencing precedes state epoch fencing", func(t *testing.T, h *harness) { initSharePartition(h, testKey, 3); writeAndReplayRecord(t, h, 4) },
			defaultWrite(1, 1), withDefault(kafkaerr.FencedLeaderEpoch)},
		{"higher epochs are accepted", func(t *testing.T, h *harness) { initSharePartition(h, testKey, 1); writeAndReplayRecord(t, h, 1) },
			defaultWrite(7, 9), Result{}},
		// Extra validation: before the state is consulted, so even an uninitialized key gets it.
		{"start offset below -1", nil, func() WriteRequest { r := defaultWrite(0, 0); r.StartOffset = -2; return r }(), invalid(msgNegativeStartOffset)},
		{"delivery complete count below -1", nil, func() WriteRequest { r := defaultWrite(0, 0); r.DeliveryCompleteCount = -5; return r }(),
			invalid("The delivery complete count cannot be less than -1.")},
		{"first offset above last", nil, func() WriteRequest {
			r := defaultWrite(0, 0)
			r.StateBatches = bs(sb(0, 1, 0, 1), sb(9, 3, 0, 1))
			return r
		}(),
			invalid("State batch 1 has first offset 9 greater than last offset 3.")},
		{"negative first offset", nil, func() WriteRequest { r := defaultWrite(0, 0); r.StateBatches = bs(sb(-4, 3, 0, 1)); return r }(),
			invalid("State batch 0 has a negative first offset -4.")},
		{"delivery state 3", nil, func() WriteRequest { r := defaultWrite(0, 0); r.StateBatches = bs(sb(0, 3, 3, 1)); return r }(),
			invalid("State batch 0 has delivery state 3; the valid states are 0 (available), 1 (acquired), 2 (acknowledged) and 4 (archived).")},
		{"negative delivery count", nil, func() WriteRequest { r := defaultWrite(0, 0); r.StateBatches = bs(sb(0, 3, 0, -1)); return r }(),
			invalid("State batch 0 has delivery count -1; the valid counts are 0 to 32767.")},
		{"extra validation runs after Kafka's epoch checks", nil, func() WriteRequest { r := defaultWrite(-1, 0); r.StartOffset = -9; return r }(), invalid(msgNegativeLeader)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 500)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			before := h.m.view(tt.req.Key)
			got := h.write(tt.req)
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if tt.want.Code != kafkaerr.None {
				h.noRecord()
				if after := h.m.view(tt.req.Key); !reflect.DeepEqual(after, before) {
					t.Fatalf("a rejected write changed the state: %+v → %+v", before, after)
				}
			}
		})
	}
}

// Writes never change the epochs (KAFKA-19456): the record carries the stored ones.
func TestWriteKeepsStoredEpochs(t *testing.T) {
	h := newHarness(t, 500)
	initSharePartition(h, testKey, 1)
	writeAndReplayRecord(t, h, 2)
	if res := h.write(defaultWrite(9, 8)); res.Code != kafkaerr.None {
		t.Fatal(res)
	}
	r := h.lastRecord()
	if r.Type != record.TypeUpdate || r.Update.LeaderEpoch != 2 {
		t.Fatalf("record %+v: want an update with leader epoch 2", r)
	}
	v := h.m.view(testKey)
	if v.MaxLeaderEpoch != 2 || *v.MaxStateEpoch != 1 || v.Offset.StateEpoch != 1 || v.Offset.LeaderEpoch != 2 {
		t.Fatalf("epochs changed: %+v", v)
	}
}

func TestWriteStateSuccess(t *testing.T) {
	h := newHarness(t, 500)
	initSharePartition(h, testKey, 0)
	writeAndReplayRecord(t, h, 0)
	req := defaultWrite(0, 0)
	if res := h.write(req); res != (Result{}) {
		t.Fatal(res)
	}
	want := record.UpdateValue{SnapshotEpoch: 0, LeaderEpoch: 0, StartOffset: 0, DeliveryCompleteCount: 11, StateBatches: bs(sb(0, 10, 0, 1))}
	if r := h.lastRecord(); r.Type != record.TypeUpdate || !reflect.DeepEqual(*r.Update, want) {
		t.Fatalf("record %+v, want update %+v", r, want)
	}
	v := h.m.view(testKey)
	wantState := record.SnapshotValue{StartOffset: 0, DeliveryCompleteCount: 11, StateBatches: bs(sb(0, 10, 0, 1))}
	if !reflect.DeepEqual(v.Offset, wantState) || v.MaxLeaderEpoch != 0 {
		t.Fatalf("state %+v, want %+v", v.Offset, wantState)
	}
}

func TestSubsequentWritesCombine(t *testing.T) {
	h := newHarness(t, 500)
	initSharePartition(h, testKey, 0)
	writeAndReplayRecord(t, h, 0)
	h.write(defaultWrite(0, 0))
	h.records()
	req2 := WriteRequest{Key: testKey, StartOffset: 0, DeliveryCompleteCount: 21, StateBatches: bs(sb(11, 20, 0, 1))}
	h.write(req2)
	if r := h.lastRecord(); r.Type != record.TypeUpdate || r.Update.SnapshotEpoch != 0 || !slices.Equal(r.Update.StateBatches, req2.StateBatches) {
		t.Fatalf("record %+v", r)
	}
	if got := h.m.view(testKey).Offset.StateBatches; !slices.Equal(got, bs(sb(0, 20, 0, 1))) {
		t.Fatalf("batches %v, want one combined batch", got)
	}
}

// testWriteStateDiscardsStartOffsetRegression and the three delivery-complete-count cases
// (Kafka's generateShareStateRecord, #23074, #23112).
func TestStartOffsetAndDeliveryCompleteCountRules(t *testing.T) {
	tests := []struct {
		name        string
		req1, req2  WriteRequest
		wantRecord2 record.UpdateValue
		wantSO      int64
		wantDCC     int32
		wantBatches []StateBatch
	}{
		{
			name:        "start offset never regresses",
			req1:        WriteRequest{StartOffset: 5, DeliveryCompleteCount: 10, StateEpoch: 5, LeaderEpoch: 3, StateBatches: bs(sb(11, 20, 4, 1))},
			req2:        WriteRequest{StartOffset: 2, DeliveryCompleteCount: 10, StateEpoch: 5, LeaderEpoch: 3, StateBatches: bs(sb(0, 20, 0, 1))},
			wantRecord2: record.UpdateValue{LeaderEpoch: 3, StartOffset: 5, DeliveryCompleteCount: 10, StateBatches: bs(sb(5, 20, 0, 1))},
			wantSO:      5, wantDCC: 10, wantBatches: bs(sb(5, 10, 0, 1), sb(11, 20, 4, 1)),
		},
		{
			name:        "greater start offset takes the incoming count",
			req1:        WriteRequest{StartOffset: 5, DeliveryCompleteCount: 10, StateEpoch: 5, LeaderEpoch: 3},
			req2:        WriteRequest{StartOffset: 11, DeliveryCompleteCount: 4, StateEpoch: 5, LeaderEpoch: 3},
			wantRecord2: record.UpdateValue{LeaderEpoch: 3, StartOffset: 11, DeliveryCompleteCount: 4},
			wantSO:      11, wantDCC: 4,
		},
		{
			name:        "greater start offset takes the incoming count even when unknown",
			req1:        WriteRequest{StartOffset: 5, DeliveryCompleteCount: 10, StateEpoch: 5, LeaderEpoch: 3},
			req2:        WriteRequest{StartOffset: 11, DeliveryCompleteCount: -1, StateEpoch: 5, LeaderEpoch: 3},
			wantRecord2: record.UpdateValue{LeaderEpoch: 3, StartOffset: 11, DeliveryCompleteCount: -1},
			wantSO:      11, wantDCC: -1,
		},
		{
			name:        "equal start offset keeps the larger count",
			req1:        WriteRequest{StartOffset: 11, DeliveryCompleteCount: 10, StateEpoch: 5, LeaderEpoch: 3},
			req2:        WriteRequest{StartOffset: 11, DeliveryCompleteCount: 5, StateEpoch: 5, LeaderEpoch: 3},
			wantRecord2: record.UpdateValue{LeaderEpoch: 3, StartOffset: 11, DeliveryCompleteCount: 10},
			wantSO:      11, wantDCC: 10,
		},
		{
			name:        "smaller start offset keeps the stored count",
			req1:        WriteRequest{StartOffset: 15, DeliveryCompleteCount: 10, StateEpoch: 5, LeaderEpoch: 3},
			req2:        WriteRequest{StartOffset: 11, DeliveryCompleteCount: 20, StateEpoch: 5, LeaderEpoch: 3},
			wantRecord2: record.UpdateValue{LeaderEpoch: 3, StartOffset: 15, DeliveryCompleteCount: 10},
			wantSO:      15, wantDCC: 10,
		},
		{
			name:        "start offset -1 keeps the stored count",
			req1:        WriteRequest{StartOffset: 15, DeliveryCompleteCount: 10, StateEpoch: 5, LeaderEpoch: 3},
			req2:        WriteRequest{StartOffset: -1, DeliveryCompleteCount: 30, StateEpoch: 5, LeaderEpoch: 3},
			wantRecord2: record.UpdateValue{LeaderEpoch: 3, StartOffset: 15, DeliveryCompleteCount: 10},
			wantSO:      15, wantDCC: 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 500)
			initSharePartition(h, testKey, 5)
			writeAndReplayRecord(t, h, 3)
			tt.req1.Key, tt.req2.Key = testKey, testKey
			if res := h.write(tt.req1); res.Code != kafkaerr.None {
				t.Fatal(res)
			}
			h.records()
			if res := h.write(tt.req2); res.Code != kafkaerr.None {
				t.Fatal(res)
			}
			if r := h.lastRecord(); !reflect.DeepEqual(*r.Update, tt.wantRecord2) {
				t.Fatalf("second record %+v, want %+v", *r.Update, tt.wantRecord2)
			}
			v := h.m.view(testKey).Offset
			if v.StartOffset != tt.wantSO || v.DeliveryCompleteCount != tt.wantDCC || !slices.Equal(v.StateBatches, tt.wantBatches) || v.StateEpoch != 5 || v.LeaderEpoch != 3 {
				t.Fatalf("state %+v", v)
			}
		})
	}
}

func TestReadCases(t *testing.T) {
	t.Run("uninitialized", func(t *testing.T) {
		h := newHarness(t, 500)
		if got := h.read(testKey, 0); got.Result != invalid(msgReadUninitialized) {
			t.Fatalf("got %+v", got)
		}
		if h.m.view(testKey) != nil {
			t.Fatal("state created")
		}
	})
	t.Run("success at the same leader epoch writes nothing", func(t *testing.T) {
		h := newHarness(t, 500)
		initSharePartition(h, testKey, 0)
		writeAndReplayRecord(t, h, 0)
		got := h.read(testKey, 0)
		want := ReadResult{StateEpoch: 0, StartOffset: 0, StateBatches: bs(sb(0, 10, 0, 1))}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		h.noRecord()
	})
	t.Run("invalid partition and negative leader epoch", func(t *testing.T) {
		h := newHarness(t, 500)
		initSharePartition(h, testKey, 0)
		writeAndReplayRecord(t, h, 0)
		k := testKey
		k.Partition = -1
		if got := h.read(k, 5); got.Result != invalid(msgNegativePartition) {
			t.Fatalf("got %+v", got)
		}
		if got := h.read(testKey, -1); got.Result != invalid(msgNegativeLeader) {
			t.Fatalf("got %+v", got)
		}
		h.noRecord()
		if v := h.m.view(testKey); v.MaxLeaderEpoch != 0 {
			t.Fatalf("leader epoch changed to %d", v.MaxLeaderEpoch)
		}
	})
	t.Run("fenced", func(t *testing.T) {
		h := newHarness(t, 500)
		initSharePartition(h, testKey, 0)
		writeAndReplayRecord(t, h, 5)
		if got := h.read(testKey, 3); got.Result != withDefault(kafkaerr.FencedLeaderEpoch) {
			t.Fatalf("got %+v", got)
		}
		if v := h.m.view(testKey); v.MaxLeaderEpoch != 5 {
			t.Fatalf("leader epoch %d", v.MaxLeaderEpoch)
		}
	})
	t.Run("a higher leader epoch is claimed with a record", func(t *testing.T) {
		h := newHarness(t, 500)
		initSharePartition(h, testKey, 0)
		got := h.read(testKey, 2)
		if want := (ReadResult{StateEpoch: 0, StartOffset: -1}); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		r := h.lastRecord()
		want := record.UpdateValue{SnapshotEpoch: 0, LeaderEpoch: 2, StartOffset: -1, DeliveryCompleteCount: -1}
		if r.Type != record.TypeUpdate || !reflect.DeepEqual(*r.Update, want) {
			t.Fatalf("record %+v, want update %+v", r, want)
		}
		if v := h.m.view(testKey); v.MaxLeaderEpoch != 2 || v.Offset.LeaderEpoch != 2 {
			t.Fatalf("state %+v", v)
		}
		// The same epoch again: no record; an older leader's write is now fenced.
		if got := h.read(testKey, 2); got.Code != kafkaerr.None {
			t.Fatal(got)
		}
		h.noRecord()
		if got := h.write(defaultWrite(1, 0)); got != withDefault(kafkaerr.FencedLeaderEpoch) {
			t.Fatalf("old leader's write: %+v", got)
		}
	})
}

func TestReadSummary(t *testing.T) {
	h := newHarness(t, 500)
	if got, want := h.summary(testKey), (SummaryResult{StartOffset: -1, DeliveryCompleteCount: -1}); got != want {
		t.Fatalf("absent: got %+v, want %+v", got, want)
	}
	initSharePartition(h, testKey, 0)
	writeAndReplayRecord(t, h, 0)
	if got, want := h.summary(testKey), (SummaryResult{StartOffset: 0, DeliveryCompleteCount: 0}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// No fencing for summaries; the leader epoch reported is the state's.
	writeAndReplayRecord(t, h, 4)
	if got := h.m.summary(&SummaryRequest{Key: testKey, LeaderEpoch: 1}); got.Code != kafkaerr.None || got.LeaderEpoch != 4 {
		t.Fatalf("got %+v", got)
	}
	k := testKey
	k.Partition = -1
	if got := h.summary(k); got.Result != invalid(msgNegativePartition) {
		t.Fatalf("got %+v", got)
	}
}

// testNonSequentialBatchUpdates, the worked example of Kafka's PersisterStateBatchCombiner (limit
// 0: every write is a snapshot).
func TestNonSequentialBatchUpdates(t *testing.T) {
	h := newHarness(t, 0)
	initSharePartition(h, testKey, 0)
	writeAndReplayRecord(t, h, 0)
	req := WriteRequest{Key: testKey, StartOffset: 100, DeliveryCompleteCount: 0,
		StateBatches: bs(sb(100, 109, 1, 1), sb(110, 119, 1, 2), sb(120, 129, 1, 0))}
	h.write(req)
	r := h.lastRecord()
	now := h.clock.Now().UnixMilli()
	want := record.SnapshotValue{SnapshotEpoch: 3, StartOffset: 100, DeliveryCompleteCount: 0, StateBatches: req.StateBatches, CreateTimestamp: now, WriteTimestamp: now}
	if r.Type != record.TypeSnapshot || !reflect.DeepEqual(*r.Snapshot, want) {
		t.Fatalf("record %+v, want snapshot %+v", r, want)
	}
	h.write(WriteRequest{Key: testKey, StartOffset: -1, DeliveryCompleteCount: 10, StateBatches: bs(sb(100, 109, 2, 1))})
	h.write(WriteRequest{Key: testKey, StartOffset: 110, DeliveryCompleteCount: 10, StateBatches: bs(sb(120, 129, 2, 1))})
	rs := h.records()
	final := record.SnapshotValue{SnapshotEpoch: 5, StartOffset: 110, DeliveryCompleteCount: 10, CreateTimestamp: now, WriteTimestamp: now,
		StateBatches: bs(sb(110, 119, 1, 2), sb(120, 129, 2, 1))}
	if len(rs) != 2 || rs[1].Type != record.TypeSnapshot || !reflect.DeepEqual(*rs[1].Snapshot, final) {
		t.Fatalf("records %+v, want last snapshot %+v", rs, final)
	}
	if v := h.m.view(testKey); !reflect.DeepEqual(v.Offset, final) {
		t.Fatalf("state %+v, want %+v", v.Offset, final)
	}
}

func TestSnapshotUpdateCountBoundary(t *testing.T) {
	h := newHarness(t, 2)
	initSharePartition(h, testKey, 0)
	req := WriteRequest{Key: testKey, StartOffset: 0, StateBatches: bs(sb(0, 10, 0, 1))}
	for i, want := range []record.Type{record.TypeUpdate, record.TypeUpdate, record.TypeSnapshot, record.TypeUpdate} {
		h.write(req)
		if r := h.lastRecord(); r.Type != want {
			t.Fatalf("write %d: %s, want %s", i+1, r.Type, want)
		}
	}
}

// cadence runs n writes and returns the type of each record.
func cadence(t *testing.T, h *harness, k Key, n int) string {
	t.Helper()
	var sbd strings.Builder
	for i := 0; i < n; i++ {
		if res := h.write(WriteRequest{Key: k, StateEpoch: 2, StartOffset: int64(i), StateBatches: bs(sb(int64(i), int64(i)+3, 0, 1))}); res.Code != kafkaerr.None {
			t.Fatal(res)
		}
		if h.lastRecord().Type == record.TypeSnapshot {
			sbd.WriteByte('S')
		} else {
			sbd.WriteByte('u')
		}
	}
	return sbd.String()
}

// expectedCadence: after a snapshot exactly limit updates, then a snapshot.
func expectedCadence(limit, n, updatesSoFar int) string {
	var sbd strings.Builder
	c := updatesSoFar
	for i := 0; i < n; i++ {
		if c >= limit {
			sbd.WriteByte('S')
			c = 0
		} else {
			sbd.WriteByte('u')
			c++
		}
	}
	return sbd.String()
}

// The exact snapshot cadence of Kafka's generateShareStateRecord (after Kafka #21426) for the
// limits 200, 500 and 1000 and a per-group override, read at the moment of each decision.
func TestSnapshotCadence(t *testing.T) {
	for _, limit := range []int{200, 500, 1000} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			h := newHarness(t, limit)
			if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0}); res.Code != kafkaerr.None {
				t.Fatal(res)
			}
			if h.lastRecord().Type != record.TypeSnapshot {
				t.Fatal("initialize did not write a snapshot")
			}
			n := 3*(limit+1) + 7
			got := cadence(t, h, testKey, n)
			if want := expectedCadence(limit, n, 0); got != want {
				t.Fatalf("cadence differs at %d", firstDiff(got, want))
			}
			if strings.Count(got[:limit+1], "u") != limit || got[limit] != 'S' {
				t.Fatalf("want exactly %d updates then a snapshot", limit)
			}
		})
	}
	t.Run("per-group override", func(t *testing.T) {
		h := newHarness(t, 500)
		h.limits.set("fast", 200)
		kFast, kDefault := Key{"fast", testTopic, 0}, Key{"other", testTopic, 0}
		for _, k := range []Key{kFast, kDefault} {
			h.initialize(InitializeRequest{Key: k, StateEpoch: 1, StartOffset: 0})
		}
		h.records()
		if got, want := cadence(t, h, kFast, 603), expectedCadence(200, 603, 0); got != want {
			t.Fatalf("override cadence differs at %d", firstDiff(got, want))
		}
		if got, want := cadence(t, h, kDefault, 603), expectedCadence(500, 603, 0); got != want {
			t.Fatalf("default cadence differs at %d", firstDiff(got, want))
		}
	})
	t.Run("a limit lowered below the count makes the next record a snapshot", func(t *testing.T) {
		h := newHarness(t, 500)
		h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0})
		h.records()
		if got := cadence(t, h, testKey, 300); got != strings.Repeat("u", 300) {
			t.Fatal("unexpected snapshot")
		}
		h.limits.set("group1", 200)
		if got, want := cadence(t, h, testKey, 402), "S"+expectedCadence(200, 401, 0); got != want {
			t.Fatalf("after lowering: differs at %d", firstDiff(got, want))
		}
		h.limits.set("group1", 1000)
		// The count restarted at the last snapshot; with the raised limit updates continue.
		_ = cadence(t, h, testKey, 10)
	})
	t.Run("reads that raise the leader epoch count as updates", func(t *testing.T) {
		h := newHarness(t, 3)
		h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0})
		h.records()
		var got strings.Builder
		for le := int32(1); le <= 5; le++ {
			h.read(testKey, le)
			got.WriteString(map[record.Type]string{record.TypeSnapshot: "S", record.TypeUpdate: "u"}[h.lastRecord().Type])
		}
		if got.String() != "uuuSu" {
			t.Fatalf("got %s, want uuuSu", got.String())
		}
	})
	t.Run("an initialize restarts a partial count, a cold snapshot does not", func(t *testing.T) {
		h := newHarness(t, 4)
		h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0})
		h.records()
		cadence(t, h, testKey, 2)
		h.initialize(InitializeRequest{Key: testKey, StateEpoch: 2, StartOffset: 0})
		h.records()
		if got := cadence(t, h, testKey, 6); got != "uuuuSu" {
			t.Fatalf("after a re-initialize: got %s, want uuuuSu", got)
		}
		h.clock.advance(h.m.coldInterval)
		if n := h.cold(); n != 1 {
			t.Fatalf("cold snapshots written: %d, want 1", n)
		}
		h.records()
		// One update came after the last snapshot: three more, then the snapshot.
		if got := cadence(t, h, testKey, 6); got != "uuuSuu" {
			t.Fatalf("after a cold snapshot: got %s, want uuuSuu", got)
		}
		// The replayed state counts the same way.
		assertSameMachine(t, h.reopened(), h.m)
	})
}

func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestInitialize(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		h := newHarness(t, 500)
		if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 5, StartOffset: 10}); res != (Result{}) {
			t.Fatal(res)
		}
		now := h.clock.Now().UnixMilli()
		want := record.SnapshotValue{SnapshotEpoch: 0, StateEpoch: 5, LeaderEpoch: 0, StartOffset: 10, DeliveryCompleteCount: 0, CreateTimestamp: now, WriteTimestamp: now}
		if r := h.lastRecord(); r.Type != record.TypeSnapshot || !reflect.DeepEqual(*r.Snapshot, want) {
			t.Fatalf("record %+v, want %+v", r, want)
		}
		if v := h.m.view(testKey); *v.MaxStateEpoch != 5 {
			t.Fatal(v)
		}
	})
	t.Run("start offset -1 has an unknown delivery complete count", func(t *testing.T) {
		h := newHarness(t, 500)
		h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: -1})
		if r := h.lastRecord(); r.Snapshot.DeliveryCompleteCount != -1 {
			t.Fatalf("dcc %d", r.Snapshot.DeliveryCompleteCount)
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		h := newHarness(t, 500)
		req := InitializeRequest{Key: testKey, StateEpoch: 5, StartOffset: 10}
		h.initialize(req)
		h.records()
		before := h.m.view(testKey)
		h.clock.advance(time.Minute)
		if res := h.initialize(req); res != (Result{}) {
			t.Fatal(res)
		}
		h.noRecord()
		if after := h.m.view(testKey); !reflect.DeepEqual(after, before) {
			t.Fatalf("state changed: %+v → %+v", before, after)
		}
	})
	t.Run("not idempotent when the start offset changes", func(t *testing.T) {
		h := newHarness(t, 500)
		h.initialize(InitializeRequest{Key: testKey, StateEpoch: 5, StartOffset: 10})
		h.records()
		if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 5, StartOffset: 20}); res != (Result{}) {
			t.Fatal(res)
		}
		if r := h.lastRecord(); r.Snapshot.SnapshotEpoch != 1 || r.Snapshot.StartOffset != 20 {
			t.Fatalf("record %+v", r.Snapshot)
		}
	})
	t.Run("re-initialize is a fresh start that keeps the higher leader epoch for fencing", func(t *testing.T) {
		h := newHarness(t, 500)
		initSharePartition(h, testKey, 1)
		writeAndReplayRecord(t, h, 7)
		h.initialize(InitializeRequest{Key: testKey, StateEpoch: 2, StartOffset: 50})
		v := h.m.view(testKey)
		if v.Offset.LeaderEpoch != 0 || v.MaxLeaderEpoch != 7 || len(v.Offset.StateBatches) != 0 || v.Offset.StartOffset != 50 {
			t.Fatalf("state %+v", v)
		}
	})
	t.Run("validation", func(t *testing.T) {
		h := newHarness(t, 500)
		k := testKey
		k.Partition = -1
		if res := h.initialize(InitializeRequest{Key: k}); res != invalid(msgNegativePartition) {
			t.Fatal(res)
		}
		if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: -1, StartOffset: 1}); res != invalid(msgNegativeState) {
			t.Fatal(res)
		}
		if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: -2}); res != invalid(msgNegativeStartOffset) {
			t.Fatal(res)
		}
		long := Key{GroupID: strings.Repeat("g", 1<<15), TopicID: testTopic}
		if res := h.initialize(InitializeRequest{Key: long, StateEpoch: 1}); res.Code != kafkaerr.InvalidRequest || !strings.Contains(res.Message, "longer than") {
			t.Fatal(res)
		}
		h.replay(record.Record{Type: record.TypeSnapshot, Key: record.Key(testKey), Snapshot: &record.SnapshotValue{StateEpoch: 5}})
		if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 0}); res != withDefault(kafkaerr.FencedStateEpoch) {
			t.Fatal(res)
		}
		h.noRecord()
		// A group id no record can hold has no state: other operations see it as absent.
		if res := h.read(long, 0); res.Result != invalid(msgReadUninitialized) {
			t.Fatal(res)
		}
		if res := h.delete(long); res != (Result{}) {
			t.Fatal(res)
		}
	})
}

func TestDelete(t *testing.T) {
	h := newHarness(t, 500)
	if res := h.delete(testKey); res != (Result{}) {
		t.Fatal(res)
	}
	h.noRecord()
	h.replay(record.Record{Type: record.TypeSnapshot, Key: record.Key(testKey), Snapshot: &record.SnapshotValue{StateBatches: bs(sb(0, 10, 0, 1))}})
	if res := h.delete(testKey); res != (Result{}) {
		t.Fatal(res)
	}
	if r := h.lastRecord(); !r.Tombstone || r.Type != record.TypeSnapshot || r.Key != record.Key(testKey) {
		t.Fatalf("record %+v, want a tombstone", r)
	}
	if h.m.view(testKey) != nil {
		t.Fatal("state left after delete")
	}
	if res := h.delete(testKey); res != (Result{}) {
		t.Fatal(res)
	}
	h.noRecord()
	k := testKey
	k.Partition = -1
	if res := h.delete(k); res != invalid(msgNegativePartition) {
		t.Fatal(res)
	}
	// After a delete the key starts over: initialize succeeds at any state epoch.
	if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 0, StartOffset: 3}); res != (Result{}) {
		t.Fatal(res)
	}
	if r := h.lastRecord(); r.Snapshot.SnapshotEpoch != 0 {
		t.Fatalf("snapshot epoch %d after delete", r.Snapshot.SnapshotEpoch)
	}
}

func coldSnapshot(k Key, ts int64) record.Record {
	return record.Record{Type: record.TypeSnapshot, Key: record.Key(k), Snapshot: &record.SnapshotValue{StartOffset: 0, DeliveryCompleteCount: 11,
		CreateTimestamp: ts, WriteTimestamp: ts, StateBatches: bs(sb(0, 10, 0, 1))}}
}

// The cold-partition snapshot cases of ShareCoordinatorShardTest (interval 10 s).
func TestSnapshotColdPartitions(t *testing.T) {
	k0, k1 := Key{"group1", testTopic, 0}, Key{"group1", testTopic, 1}
	t.Run("no eligible partitions", func(t *testing.T) {
		h := newHarness(t, 500)
		ts := h.clock.Now().UnixMilli()
		h.replay(coldSnapshot(k0, ts))
		h.replay(coldSnapshot(k1, ts))
		h.clock.advance(5 * time.Second)
		if n := h.cold(); n != 0 {
			t.Fatalf("%d records", n)
		}
	})
	t.Run("updates do not refresh the write timestamp", func(t *testing.T) {
		h := newHarness(t, 500)
		ts := h.clock.Now().UnixMilli()
		h.replay(coldSnapshot(k0, ts))
		h.clock.advance(12 * time.Second)
		if n := h.cold(); n != 1 {
			t.Fatalf("%d records", n)
		}
		r := h.lastRecord()
		want := *coldSnapshot(k0, ts).Snapshot
		want.SnapshotEpoch, want.WriteTimestamp = 1, ts+12000
		if !reflect.DeepEqual(*r.Snapshot, want) {
			t.Fatalf("record %+v, want %+v", *r.Snapshot, want)
		}
		h.replay(record.Record{Type: record.TypeUpdate, Key: record.Key(k0), Update: &record.UpdateValue{StartOffset: 0, DeliveryCompleteCount: 11, StateBatches: bs(sb(0, 10, 0, 1))}})
		h.clock.advance(12 * time.Second)
		if v := h.m.view(k0); v.Offset.WriteTimestamp != ts+12000 {
			t.Fatalf("write timestamp %d", v.Offset.WriteTimestamp)
		}
	})
	t.Run("a quiet shard is not snapshotted perpetually", func(t *testing.T) {
		h := newHarness(t, 500)
		h.replay(coldSnapshot(k0, h.clock.Now().UnixMilli()))
		h.clock.advance(12 * time.Second)
		if n := h.cold(); n != 1 {
			t.Fatalf("%d records", n)
		}
		for i := 0; i < 3; i++ {
			h.clock.advance(12 * time.Second)
			if n := h.cold(); n != 0 {
				t.Fatalf("round %d: %d records from a quiet shard", i, n)
			}
		}
		// Activity makes it eligible again.
		h.write(WriteRequest{Key: k0, StartOffset: 0})
		if n := h.cold(); n != 0 {
			t.Fatal("an update alone must not make the key's snapshot fresh")
		}
		_ = h.m.view(k0)
	})
	t.Run("only keys older than the interval", func(t *testing.T) {
		h := newHarness(t, 500)
		ts := h.clock.Now().UnixMilli()
		h.replay(coldSnapshot(k0, ts))
		h.replay(coldSnapshot(k1, ts+15000))
		h.clock.advance(12 * time.Second)
		if n := h.cold(); n != 1 {
			t.Fatalf("%d records", n)
		}
		if r := h.lastRecord(); r.Key != record.Key(k0) || r.Snapshot.SnapshotEpoch != 1 || r.Snapshot.CreateTimestamp != ts {
			t.Fatalf("record %+v", r)
		}
		if h.m.view(k1).Offset.WriteTimestamp != ts+15000 || h.m.view(k0).Offset.WriteTimestamp != ts+12000 {
			t.Fatal("timestamps")
		}
	})
	t.Run("an empty shard writes nothing", func(t *testing.T) {
		h := newHarness(t, 500)
		if n := h.cold(); n != 0 {
			t.Fatal(n)
		}
	})
}

// Kafka's ShareCoordinatorOffsetsManagerTest cases.
func TestOffsetsManager(t *testing.T) {
	type step struct {
		key    int
		offset int64
		delete bool
		want   int64 // 0: absent
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"adds to internal state", []step{{1, 0, false, 0}, {1, 10, false, 10}, {2, 15, false, 10}, {1, 25, true, 15}}},
		{"single key", []step{{1, 10, false, 10}}},
		{"single key with delete", []step{{1, 10, true, 10}}},
		{"multiple keys", []step{{1, 10, false, 10}, {4, 11, false, 10}, {2, 13, false, 10}}},
		{"multiple keys with delete", []step{{1, 10, true, 10}, {4, 11, true, 11}, {2, 13, true, 13}}},
		{"redundant single key", []step{{1, 10, false, 10}, {1, 11, false, 11}, {1, 15, false, 15}}},
		{"redundant multiple keys", []step{{1, 10, false, 10}, {2, 11, false, 10}, {3, 15, false, 10}, {2, 16, false, 10}, {1, 17, false, 15}}},
		{"redundant multiple keys with delete", []step{{1, 10, false, 10}, {2, 11, false, 10}, {3, 15, true, 10}, {2, 16, false, 10}, {1, 17, false, 16}}},
		{"reverse key order", []step{{1, 10, false, 10}, {2, 11, false, 10}, {3, 15, false, 10}, {3, 18, false, 10}, {2, 20, false, 10}, {1, 25, false, 18}}},
		{"reverse key order with delete", []step{{1, 10, false, 10}, {2, 11, false, 10}, {3, 15, false, 10}, {3, 18, true, 10}, {2, 20, true, 10}, {1, 25, false, 25}}},
		{"infrequently written partition", []step{{1, 10, false, 10}, {2, 11, false, 10}, {3, 15, false, 10}, {2, 18, false, 10}, {3, 20, false, 10},
			{2, 22, false, 10}, {3, 25, false, 10}, {2, 27, false, 10}, {3, 28, false, 10}, {1, 30, false, 27}}},
		{"infrequently written partition with delete", []step{{1, 10, false, 10}, {2, 11, false, 10}, {3, 15, false, 10}, {2, 18, false, 10},
			{3, 20, true, 10}, {2, 22, false, 10}, {2, 27, true, 10}, {1, 30, false, 30}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l offsetsList
			l.reset()
			entries := map[int]*entry{}
			for i, s := range tt.steps {
				e := entries[s.key]
				if e == nil {
					e = &entry{}
					entries[s.key] = e
				}
				l.update(e, s.offset, s.delete)
				if s.delete {
					delete(entries, s.key)
				}
				got, ok := l.lastRedundant()
				if s.want == 0 && ok || s.want != 0 && (!ok || got != s.want) {
					t.Fatalf("step %d: got %d/%v, want %d", i, got, ok, s.want)
				}
			}
		})
	}
}

// Pruning offsets through the machine, with tombstones (KAFKA-19695).
func TestLastRedundantOffsetWithTombstones(t *testing.T) {
	h := newHarness(t, 500)
	k1, k2 := Key{"g", testTopic, 1}, Key{"g", testTopic, 2}
	h.initialize(InitializeRequest{Key: k1, StateEpoch: 1, StartOffset: 0}) // offset 0
	h.initialize(InitializeRequest{Key: k2, StateEpoch: 1, StartOffset: 0}) // offset 1
	if _, ok := h.m.offsets.lastRedundant(); ok {
		t.Fatal("offset 0 is never redundant")
	}
	if res := h.write(WriteRequest{Key: k1, StateEpoch: 1, StartOffset: 5}); res.Code != kafkaerr.None { // offset 2: an update does not move it
		t.Fatal(res)
	}
	h.initialize(InitializeRequest{Key: k1, StateEpoch: 2, StartOffset: 0}) // offset 3
	if got, _ := h.m.offsets.lastRedundant(); got != 1 {
		t.Fatalf("got %d, want 1 (k2's snapshot)", got)
	}
	h.delete(k2) // offset 4: k2 stops pinning the minimum
	if got, _ := h.m.offsets.lastRedundant(); got != 3 {
		t.Fatalf("after tombstone: got %d, want 3", got)
	}
	h.delete(k1) // offset 5
	if got, _ := h.m.offsets.lastRedundant(); got != 5 {
		t.Fatalf("after deleting every key: got %d, want 5 (the tombstone)", got)
	}
	assertSameMachine(t, h.reopened(), h.m)
}

// TestRecordTooLarge: an operation whose record would exceed the log's record limit is refused
// with UNKNOWN_SERVER_ERROR naming the sizes, logged with the key, and changes nothing.
func TestRecordTooLarge(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	h := newHarness(t, 0) // limit 0: every write is a snapshot of the whole state
	h.m = newMachine(zap.New(core), h.limits, h.clock.Now, 10*time.Second, 1024)
	if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0}); res.Code != kafkaerr.None {
		t.Fatal(res)
	}
	h.records()
	var many []StateBatch
	for i := int64(0); i < 200; i += 2 {
		many = append(many, sb(i, i, 0, 1))
	}
	before := h.m.view(testKey)
	res := h.write(WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: many})
	if res.Code != kafkaerr.UnknownServerError || !strings.Contains(res.Message, "exceeds the maximum record size of 1024 bytes") {
		t.Fatalf("write of an oversized state: %+v", res)
	}
	h.noRecord()
	if after := h.m.view(testKey); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused write changed the state: %+v, was %+v", after, before)
	}
	entries := logs.FilterMessageSnippet("cannot write the state record").All()
	if len(entries) != 1 || entries[0].ContextMap()["key"] != testKey.String() {
		t.Fatalf("log entries %+v, want one warning naming the key", entries)
	}
}

// TestRecordTooLargeNamesTheOperation: the message of an operation refused because its record is
// over the record limit starts as Kafka's ShareCoordinatorService words it for that RPC ("Unable
// to read share group state: " for a Read whose leader-epoch claim is the oversized record, and so
// on), not always with the Write's words.
func TestRecordTooLargeNamesTheOperation(t *testing.T) {
	long := Key{GroupID: strings.Repeat("g", 300), TopicID: testTopic, Partition: 0}
	tests := []struct {
		name string
		// setup runs with a record limit of 1024 bytes, then the limit drops to 256.
		setup func(t *testing.T, h *harness)
		op    func(h *harness) Result
		want  string
	}{
		{"initialize", nil,
			func(h *harness) Result {
				return h.initialize(InitializeRequest{Key: long, StateEpoch: 1, StartOffset: 0})
			},
			"Unable to initialize share group state: "},
		{"read claiming a leader epoch with a snapshot", func(t *testing.T, h *harness) {
			mustOK(t, h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0}))
			var many []StateBatch
			for i := int64(0); i < 40; i += 2 {
				many = append(many, sb(i, i, 0, 1))
			}
			mustOK(t, h.write(WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: many}))
		}, func(h *harness) Result { return h.read(testKey, 3).Result }, "Unable to read share group state: "},
		{"delete", func(t *testing.T, h *harness) {
			mustOK(t, h.initialize(InitializeRequest{Key: long, StateEpoch: 1, StartOffset: 0}))
		}, func(h *harness) Result { return h.delete(long) }, "Unable to delete share group state: "},
		{"write", func(t *testing.T, h *harness) {
			mustOK(t, h.initialize(InitializeRequest{Key: long, StateEpoch: 1, StartOffset: 0}))
		}, func(h *harness) Result {
			return h.write(WriteRequest{Key: long, StateEpoch: 1, StartOffset: 0})
		}, "Unable to write share group state: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 1) // the second record after a snapshot is a snapshot
			h.m = newMachine(zap.NewNop(), h.limits, h.clock.Now, 10*time.Second, 1024)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			h.records()
			h.m.maxRecord = 256
			res := tt.op(h)
			if res.Code != kafkaerr.UnknownServerError || !strings.HasPrefix(res.Message, tt.want) ||
				!strings.Contains(res.Message, "exceeds the maximum record size of 256 bytes") {
				t.Fatalf("got %+v, want UNKNOWN_SERVER_ERROR with a message starting %q", res, tt.want)
			}
			h.noRecord()
		})
	}
}

// TestStateGrowthStopsAtRecordLimit: between snapshots, a share partition's state grows only until
// a snapshot of it would exceed the record limit; a write that would grow it further is refused
// (UNKNOWN_SERVER_ERROR, logged, nothing changed), also when it advances the start offset without
// dropping batches, while writes that shrink it, and a Read's leader-epoch claim, go through.
func TestStateGrowthStopsAtRecordLimit(t *testing.T) {
	const maxRecord = 4096
	core, logs := observer.New(zapcore.WarnLevel)
	h := newHarness(t, 1000) // no snapshot during the test
	h.m = newMachine(zap.New(core), h.limits, h.clock.Now, 10*time.Second, maxRecord)
	if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0}); res.Code != kafkaerr.None {
		t.Fatal(res)
	}
	var res Result
	next, start := int64(1000), int64(0)
	for range 1000 {
		var add []StateBatch
		for range 20 {
			add = append(add, sb(next, next, 0, 1))
			next += 2
		}
		start++ // every write advances the start offset, below every batch: it drops nothing
		if res = h.write(WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: start, StateBatches: add}); res.Code != kafkaerr.None {
			break
		}
	}
	if res.Code != kafkaerr.UnknownServerError || !strings.Contains(res.Message, "to shrink the state first") {
		t.Fatalf("growing write: %+v", res)
	}
	grown := len(h.m.view(testKey).Offset.StateBatches)
	if size := record.SnapshotSizeBound(h.m.lookup(testKey).key, grown, -1); size > maxRecord {
		t.Fatalf("the state grew to a %d-byte snapshot, past the %d-byte limit", size, maxRecord)
	}
	if n := logs.FilterMessageSnippet("cannot write the state record").Len(); n != 1 {
		t.Fatalf("%d warnings, want one for the refused write", n)
	}
	// With the limit halved (a lower record limit after a restart, say) the state is over it: a
	// write that leaves as many batches (it re-acknowledges one as it is) still goes through.
	h.m.maxRecord = maxRecord / 2
	if r := h.write(WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: start, StateBatches: bs(sb(1000, 1000, 0, 1))}); r.Code != kafkaerr.None {
		t.Fatalf("write leaving an oversized state as large as it was: %+v", r)
	}
	if r := h.read(testKey, 2); r.Code != kafkaerr.None {
		t.Fatalf("read claiming a leader epoch: %+v", r)
	}
	// Archiving everything written collapses the state to one batch, without moving the start.
	if r := h.write(WriteRequest{Key: testKey, StateEpoch: 1, LeaderEpoch: 2, StartOffset: start, StateBatches: bs(sb(1000, next, 4, 1))}); r.Code != kafkaerr.None {
		t.Fatalf("write archiving every record: %+v", r)
	}
	if got := len(h.m.view(testKey).Offset.StateBatches); got != 1 {
		t.Fatalf("%d batches after archiving every record, want 1", got)
	}
}

// BenchmarkWriteAtRecordLimit: a write to a share partition whose state is as large as a snapshot
// can hold, re-acknowledging one of its batches (the state does not grow, so it is accepted). The
// growth guard counts the merge over the region the write touches, not over the whole state.
func BenchmarkWriteAtRecordLimit(b *testing.B) {
	const maxRecord = 1 << 20
	h := newHarness(b, 1<<30)
	h.m = newMachine(zap.NewNop(), h.limits, h.clock.Now, 10*time.Second, maxRecord)
	if res := h.initialize(InitializeRequest{Key: testKey, StateEpoch: 1, StartOffset: 0}); res.Code != kafkaerr.None {
		b.Fatal(res)
	}
	mk := h.m.lookup(testKey).key
	n := 0
	for record.SnapshotSizeBound(mk, n+1, -1) <= maxRecord {
		n++
	}
	many := make([]StateBatch, n)
	for i := range many {
		many[i] = sb(int64(2*i), int64(2*i), 0, 1)
	}
	if res := h.write(WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: many}); res.Code != kafkaerr.None {
		b.Fatal(res)
	}
	past := int64(2*n + 5)
	if res := h.write(WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: bs(sb(past, past, 0, 1))}); res.Code != kafkaerr.UnknownServerError {
		b.Fatalf("a growing write at the limit: %+v, want it refused", res)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		o := int64(2 * (i % n))
		if res := h.m.write(&WriteRequest{Key: testKey, StateEpoch: 1, StartOffset: 0, StateBatches: bs(sb(o, o, 0, 1))}, &h.p); res.Code != kafkaerr.None {
			b.Fatal(res)
		}
		h.p.reset()
		i++
	}
}

// A cold-partition snapshot job written in steps skips the keys that operations applied between
// its steps deleted or gave a fresh snapshot, and copies the current state of the others; it
// visits the keys oldest snapshot first.
func TestSnapshotColdInSteps(t *testing.T) {
	h := newHarness(t, 500)
	ts := h.clock.Now().UnixMilli()
	keys := []Key{{"group1", testTopic, 3}, {"group1", testTopic, 1}, {"group1", testTopic, 2}, {"group1", testTopic, 0}}
	for _, k := range keys {
		h.replay(coldSnapshot(k, ts))
	}
	h.clock.advance(12 * time.Second)
	j := h.m.startCold()
	if j == nil || len(j.keys) != 4 {
		t.Fatalf("job %+v", j)
	}
	step := func(max int) bool {
		h.begin()
		defer h.end()
		return h.m.coldStep(j, &h.p, max, 1<<20)
	}
	if step(1) {
		t.Fatal("done after one key")
	}
	if r := h.lastRecord(); r.Key != record.Key(keys[0]) || r.Snapshot.WriteTimestamp != ts+12000 {
		t.Fatalf("first record %+v, want the oldest snapshot's key %v", r, keys[0])
	}
	h.delete(keys[1])
	mustOK(t, h.initialize(InitializeRequest{Key: keys[2], StateEpoch: 5, StartOffset: 7}))
	h.write(WriteRequest{Key: keys[3], StartOffset: 4, StateBatches: bs(sb(4, 20, 2, 1))})
	h.records()
	if !step(10) || j.written != 2 {
		t.Fatalf("written %d, want 2", j.written)
	}
	recs := h.records()
	if len(recs) != 1 || recs[0].Key != record.Key(keys[3]) || recs[0].Snapshot.StartOffset != 4 || recs[0].Snapshot.CreateTimestamp != ts {
		t.Fatalf("records %+v, want one cold snapshot of %v with the update applied", recs, keys[3])
	}
	if v := h.m.view(keys[2]); v.Offset.StateEpoch != 5 || v.Offset.WriteTimestamp != h.clock.Now().UnixMilli() {
		t.Fatalf("re-initialized key %+v", v.Offset)
	}
	assertSameMachine(t, h.reopened(), h.m)
}

// One request can name hundreds of thousands of keys: the machine's per-key log entries are
// sampled, so that a client deleting absent keys cannot write a log line per key.
func TestMachineLogIsSampled(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	m := newMachine(zap.New(core), fixedLimit(500), time.Now, 0, 0)
	var p pending
	for i := range 1000 {
		if r := m.delete(&DeleteRequest{Key: Key{GroupID: "g", TopicID: testTopic, Partition: int32(i)}}, &p); r.Code != kafkaerr.None {
			t.Fatal(r)
		}
	}
	// Within one second: the first 100, then one in 100 (a second boundary at most doubles it).
	if n := logs.FilterMessage("delete of a share partition that has no state").Len(); n < 100 || n > 220 {
		t.Fatalf("%d log entries for 1000 deletes of absent keys, want the first 100 and then one in 100", n)
	}
}
