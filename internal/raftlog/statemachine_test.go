package raftlog

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// Every replica ends with the same log, and the shards of the followers hold what the leader's
// shard appended.
func TestReplicasAgree(t *testing.T) {
	r := newFakeRaft(t, 3)
	leader := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	followers := []*shardModel{
		newShardModel(t, NewReplica(r.replicas[1].sm, r.proposer(2), time.Second)),
		newShardModel(t, NewReplica(r.replicas[2].sm, r.proposer(3), time.Second)),
	}
	for i := range 20 {
		if err := leader.append("a"+string(rune('a'+i)), 1+i%3); err != nil {
			t.Fatal(err)
		}
	}
	want := recordsOf(t, r.replicas[0])
	for _, fr := range r.replicas[1:] {
		if got := recordsOf(t, fr); !slices.Equal(got, want) {
			t.Fatalf("replica %d holds %v, the leader %v", fr.id, got, want)
		}
	}
	for i, f := range followers {
		f.follow()
		if got := f.list(); !slices.Equal(got, want) {
			t.Fatalf("follower shard %d holds %v, want %v", i, got, want)
		}
	}
	if !slices.Equal(leader.list(), want) {
		t.Fatalf("the leader's shard holds %v, its log %v", leader.list(), want)
	}
}

// An entry built on a log another leader has appended to since is refused by every replica: the
// deposed leader's shard learns ErrConflict, follows and can append again.
func TestStaleLeaderIsRefused(t *testing.T) {
	r := newFakeRaft(t, 3)
	old := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	if err := old.append("x", 2); err != nil {
		t.Fatal(err)
	}
	newer := newShardModel(t, NewReplica(r.replicas[1].sm, r.proposer(2), time.Second))
	if err := newer.append("y", 1); err != nil {
		t.Fatal(err)
	}
	// The old leader's shard has not followed "y": its replica knows, and refuses at once.
	if err := old.append("z", 1); !errors.Is(err, ErrBehind) {
		t.Fatalf("append before following: %v, want ErrBehind", err)
	}
	// Built on the old end, proposed anyway (as a deposed leader whose replica had not yet
	// applied "y" would): every replica refuses it.
	cmd := appendEntry(nil, &entry{expectedEnd: 2, proposer: 1, seq: 99, records: [][]byte{[]byte("stale")}})
	value, err := r.proposer(1).Propose(t.Context(), cmd)
	if err != nil || value != resultConflict {
		t.Fatalf("stale entry: result %d, %v; want a conflict", value, err)
	}
	old.follow()
	if err := old.append("z", 1); err != nil {
		t.Fatal(err)
	}
	want := []string{"0:x-0", "1:x-1", "2:y-0", "3:z-0"}
	for _, fr := range r.replicas {
		if got := recordsOf(t, fr); !slices.Equal(got, want) {
			t.Fatalf("replica %d holds %v, want %v", fr.id, got, want)
		}
	}
}

// A replica that stops without syncing keeps what its last sync covered; the entries after it
// are applied again, and its log ends as the others'.
func TestRestartReappliesWhatWasNotSynced(t *testing.T) {
	r := newFakeRaft(t, 3)
	leader := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	crash := r.replicas[2]
	for i := range 10 {
		if err := leader.append("s", 2); err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			if err := crash.sm.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Power cut: only what was synced survives (some unsynced bytes too, at random).
	r.mu.Lock()
	crash.fs = crash.fs.CrashClone(faultfs.CrashOptions{ZeroFill: true})
	crash.up = false
	r.mu.Unlock()
	r.open(crash)
	if crash.sm.AppliedIndex() != 10 {
		t.Fatalf("applied %d after catching up, want 10", crash.sm.AppliedIndex())
	}
	if got, want := recordsOf(t, crash), recordsOf(t, r.replicas[0]); !slices.Equal(got, want) {
		t.Fatalf("restarted replica holds %v, want %v", got, want)
	}
}

// A replica far behind receives the leader's log as a snapshot: its log becomes the leader's,
// with the same offsets from the same log-start offset, and its shard loads it.
func TestSnapshotReplacesALaggingLog(t *testing.T) {
	r := newFakeRaft(t, 3)
	leader := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	lag := r.replicas[2]
	lagShard := newShardModel(t, NewReplica(lag.sm, r.proposer(3), time.Second))
	r.mu.Lock()
	lag.up = false
	r.mu.Unlock()
	for range 30 {
		if err := leader.append("big", 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.replicas[0].sm.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.rep.SetStartOffset(60); err != nil {
		t.Fatal(err)
	}
	buf := saveSnapshot(t, r.replicas[0].sm)
	if err := lag.sm.RecoverFromSnapshot(buf, nil); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	lag.applied, lag.up = lag.sm.AppliedIndex(), true
	r.mu.Unlock()
	want := recordsOf(t, r.replicas[0])
	if got := recordsOf(t, lag); !slices.Equal(got, want) {
		t.Fatalf("after the snapshot: %v, want %v", got, want)
	}
	if start, _, _ := lag.sm.bounds(); start != 60 {
		t.Fatalf("log-start offset %d after the snapshot, want 60", start)
	}
	lagShard.follow() // told to reload
	if !slices.Equal(lagShard.list(), want) {
		t.Fatalf("the lagging shard holds %v, want %v", lagShard.list(), want)
	}
	if err := leader.append("after", 1); err != nil {
		t.Fatal(err)
	}
	lagShard.follow()
	if got := recordsOf(t, lag); !slices.Equal(got, recordsOf(t, r.replicas[0])) {
		t.Fatalf("the recovered replica does not follow: %v", got)
	}
}

// A snapshot recovery cut short leaves the recovering marker: the next Open empties the log and
// asks for the snapshot again (applied index 0).
func TestInterruptedRecoveryStartsOver(t *testing.T) {
	r := newFakeRaft(t, 2)
	leader := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	for range 5 {
		if err := leader.append("r", 2); err != nil {
			t.Fatal(err)
		}
	}
	buf := saveSnapshot(t, r.replicas[0].sm)
	b := r.replicas[1]
	truncated := bytes.NewReader(buf.Bytes()[:buf.Len()-20])
	if err := b.sm.RecoverFromSnapshot(truncated, nil); err == nil {
		t.Fatal("recovery from a truncated snapshot succeeded")
	}
	_ = b.sm.Close()
	sm2 := NewStateMachine(zaptest.NewLogger(t), r.options(b))
	index, err := sm2.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sm2.Close()
	if start, end, _ := sm2.bounds(); index != 0 || start != 0 || end != 0 {
		t.Fatalf("after an interrupted recovery: index %d, log [%d, %d); want an empty log at index 0", index, start, end)
	}
}

// Pruning stops at what is durable: a restart cuts the log back to its last sync, which must
// not lie below the log-start offset.
func TestPruneStopsAtTheSyncedEnd(t *testing.T) {
	r := newFakeRaft(t, 1)
	s := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	if err := s.append("p", 4); err != nil {
		t.Fatal(err)
	}
	if err := r.replicas[0].sm.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.append("q", 4); err != nil {
		t.Fatal(err)
	}
	start, err := s.rep.SetStartOffset(7)
	if err != nil {
		t.Fatal(err)
	}
	if start != 4 {
		t.Fatalf("log-start offset %d, want the synced end 4", start)
	}
}

// A log a single node wrote has no applied file: a replica refuses to start on it.
func TestOpenRefusesASingleNodeLog(t *testing.T) {
	r := newFakeRaft(t, 1)
	fr := r.replicas[0]
	s := newShardModel(t, NewReplica(fr.sm, r.proposer(1), time.Second))
	if err := s.append("n", 2); err != nil {
		t.Fatal(err)
	}
	_ = fr.sm.Close()
	if err := fr.fs.Remove("/p/" + appliedFileName); err != nil {
		t.Fatal(err)
	}
	m := NewStateMachine(zaptest.NewLogger(t), r.options(fr))
	if _, err := m.Open(nil); err == nil {
		_ = m.Close()
		t.Fatal("Open of a log without an applied file succeeded")
	}
	fr.sm = nil
}

// Entries a follower's shard did not take yet past the memory bound are read from the log.
func TestFollowAfterTheQueueOverflowed(t *testing.T) {
	r := newFakeRaft(t, 2)
	leader := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	follower := newShardModel(t, NewReplica(r.replicas[1].sm, r.proposer(2), time.Second))
	if err := leader.append("o", 1); err != nil {
		t.Fatal(err)
	}
	r.replicas[1].sm.mu.Lock()
	r.replicas[1].sm.tail.queue, r.replicas[1].sm.tail.overflow = nil, true
	r.replicas[1].sm.mu.Unlock()
	if err := leader.append("o2", 2); err != nil {
		t.Fatal(err)
	}
	follower.follow()
	if got, want := follower.list(), recordsOf(t, r.replicas[0]); !slices.Equal(got, want) {
		t.Fatalf("follower holds %v, want %v", got, want)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	in := entry{expectedEnd: 42, proposer: 3, seq: 7, records: [][]byte{[]byte("a"), {}, []byte("ccc")}}
	var out entry
	if err := decodeEntry(appendEntry(nil, &in), &out); err != nil {
		t.Fatal(err)
	}
	if out.expectedEnd != 42 || out.proposer != 3 || out.seq != 7 || len(out.records) != 3 || string(out.records[2]) != "ccc" {
		t.Fatalf("decoded %+v", out)
	}
	b := appendEntry(nil, &in)
	for n := range len(b) {
		if err := decodeEntry(b[:n], &out); err == nil {
			t.Fatalf("a %d-byte prefix decoded", n)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(appendEntry(nil, &entry{expectedEnd: 1, records: [][]byte{[]byte("x")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e entry
		if decodeEntry(b, &e) == nil {
			if got := appendEntry(nil, &e); !bytes.Equal(got, b) {
				t.Fatalf("re-encoding differs")
			}
		}
	})
}

// A replica whose log directory was emptied while the Raft engine remembers it refuses to start:
// the entries it had applied may be gone from the Raft log.
func TestPrepareRefusesALostLog(t *testing.T) {
	r := newFakeRaft(t, 1)
	fr := r.replicas[0]
	_ = fr.sm.Close()
	fr.fs = faultfs.NewCrashFS() // the directory is gone
	m := NewStateMachine(zaptest.NewLogger(t), r.options(fr))
	if err := m.Prepare(true); err == nil {
		_ = m.Close()
		t.Fatal("Prepare of a lost log succeeded")
	}
	m2 := NewStateMachine(zaptest.NewLogger(t), r.options(fr))
	if err := m2.Prepare(false); err != nil {
		t.Fatalf("Prepare of a new replica: %v", err)
	}
	_ = m2.Close()
	m3 := NewStateMachine(zaptest.NewLogger(t), r.options(fr))
	if err := m3.Prepare(true); err != nil {
		t.Fatalf("Prepare of a replica whose log was created, after a restart: %v", err)
	}
	_ = m3.Close()
	fr.sm = nil
}

// A load that reads the log while a snapshot from the leader replaces it reports ErrReplaced,
// not the damage it saw, so that the shard loads again rather than wait for a repair.
func TestLoadDuringReplacement(t *testing.T) {
	r := newFakeRaft(t, 2)
	leader := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	for range 20 {
		if err := leader.append("z", 3); err != nil {
			t.Fatal(err)
		}
	}
	buf := saveSnapshot(t, r.replicas[0].sm)
	b := r.replicas[1]
	first := true
	_, _, err := b.sm.load(func(int64, []byte) error {
		if first {
			first = false
			if err := b.sm.RecoverFromSnapshot(bytes.NewReader(buf.Bytes()), nil); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if !errors.Is(err, ErrReplaced) {
		t.Fatalf("load during a replacement: %v, want ErrReplaced", err)
	}
}

// saveSnapshot returns the snapshot m sends another replica.
func saveSnapshot(t *testing.T, m *StateMachine) *bytes.Buffer {
	t.Helper()
	ctx, err := m.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.SaveSnapshot(ctx, &buf, nil); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// An import seeds every replica's empty log at the source's offsets, appends after it, and
// changes nothing once a log holds records; the shards follow the imported records as another
// leader's, a replica that crashes keeps the seed, and the shard's own appends go on after it.
func TestImportSeedsEmptyLogs(t *testing.T) {
	r := newFakeRaft(t, 3)
	leader := newShardModel(t, NewReplica(r.replicas[0].sm, r.proposer(1), time.Second))
	follower := newShardModel(t, NewReplica(r.replicas[1].sm, r.proposer(2), time.Second))
	importer := r.proposer(1)
	propose := func(start, at int64, recs ...string) bool {
		t.Helper()
		var b [][]byte
		for _, s := range recs {
			b = append(b, []byte(s))
		}
		value, err := importer.Propose(t.Context(), ImportEntry(start, at, b))
		if err != nil {
			t.Fatal(err)
		}
		return Appended(value)
	}
	if !propose(100, 100, "a", "b") {
		t.Fatal("the seed of empty logs was refused")
	}
	if !propose(100, 102, "c") {
		t.Fatal("the append after the seed was refused")
	}
	if propose(100, 100, "x") {
		t.Fatal("a seed of logs that hold records was applied")
	}
	if propose(100, 101, "y") {
		t.Fatal("an import entry not at the log's end was applied")
	}
	want := []string{"100:a", "101:b", "102:c"}
	for _, fr := range r.replicas {
		if got := recordsOf(t, fr); !slices.Equal(got, want) {
			t.Fatalf("replica %d holds %v, want %v", fr.id, got, want)
		}
		if start, _, _ := fr.sm.bounds(); start != 100 {
			t.Fatalf("replica %d: log-start offset %d, want 100", fr.id, start)
		}
	}
	for _, s := range []*shardModel{leader, follower} {
		s.follow()
		if got := s.list(); !slices.Equal(got, want) {
			t.Fatalf("a shard holds %v after following, want %v", got, want)
		}
	}

	// Power cut of a replica that never synced after the seed: the seed is durable, the append
	// after it is applied again.
	crash := r.replicas[2]
	r.mu.Lock()
	crash.fs = crash.fs.CrashClone(faultfs.CrashOptions{ZeroFill: true})
	crash.up = false
	r.mu.Unlock()
	r.open(crash)
	if got := recordsOf(t, crash); !slices.Equal(got, want) {
		t.Fatalf("the restarted replica holds %v, want %v", got, want)
	}
	if err := leader.append("own", 1); err != nil {
		t.Fatal(err)
	}
	want = append(want, "103:own-0")
	for _, fr := range r.replicas {
		if got := recordsOf(t, fr); !slices.Equal(got, want) {
			t.Fatalf("replica %d holds %v after the shard's append, want %v", fr.id, got, want)
		}
	}
}

// A seed cut short by a crash leaves the recovering marker: the replica starts over empty and
// applies the seed again.
func TestInterruptedSeedStartsOver(t *testing.T) {
	r := newFakeRaft(t, 1)
	fr := r.replicas[0]
	if err := setMarker(fr.fs, "/p", recoveringFileName, true); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.sm.log.Append([][]byte{[]byte("half")}); err != nil {
		t.Fatal(err)
	}
	if err := fr.sm.log.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = fr.sm.Close()
	r.entries = append(r.entries, ImportEntry(7, 7, [][]byte{[]byte("s")}))
	r.open(fr)
	if got, want := recordsOf(t, fr), []string{"7:s"}; !slices.Equal(got, want) {
		t.Fatalf("after an interrupted seed: %v, want %v", got, want)
	}
}
