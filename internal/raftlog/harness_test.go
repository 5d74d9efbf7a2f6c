package raftlog

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// fakeRaft commits every proposal at once, in one order, to the replicas that are up: what Raft
// guarantees of committed entries, without elections. A replica that is down misses entries
// until it catches up from the log of entries, or receives a snapshot.
type fakeRaft struct {
	t        testing.TB
	mu       sync.Mutex
	entries  [][]byte // index i+1
	replicas []*fakeReplica
}

type fakeReplica struct {
	id      uint64
	fs      *faultfs.CrashFS
	sm      *StateMachine
	applied uint64 // entries handed to sm
	up      bool
}

func newFakeRaft(t testing.TB, n int) *fakeRaft {
	r := &fakeRaft{t: t}
	for i := range n {
		fr := &fakeReplica{id: uint64(i + 1), fs: faultfs.NewCrashFS()}
		r.replicas = append(r.replicas, fr)
		r.open(fr)
	}
	t.Cleanup(func() {
		for _, fr := range r.replicas {
			if fr.sm != nil {
				_ = fr.sm.Close()
			}
		}
	})
	return r
}

func (r *fakeRaft) options(fr *fakeReplica) Options {
	return Options{Dir: "/p", Log: statelog.Options{FS: fr.fs, SegmentBytes: 512}, ReplicaID: fr.id,
		Fatal: func(err error) { r.t.Errorf("replica %d: fatal: %v", fr.id, err) }}
}

// open (re)opens fr's state machine and applies the entries after what it holds.
func (r *fakeRaft) open(fr *fakeReplica) {
	r.t.Helper()
	fr.sm = NewStateMachine(zaptest.NewLogger(r.t).Named(fmt.Sprint(fr.id)), r.options(fr))
	index, err := fr.sm.Open(nil)
	if err != nil {
		r.t.Fatalf("replica %d: Open: %v", fr.id, err)
	}
	fr.applied, fr.up = index, true
	r.mu.Lock()
	defer r.mu.Unlock()
	r.catchUp(fr)
}

// catchUp applies to fr the entries it misses. r.mu is held.
func (r *fakeRaft) catchUp(fr *fakeReplica) []sm.Entry {
	var ents []sm.Entry
	for i := fr.applied; i < uint64(len(r.entries)); i++ {
		ents = append(ents, sm.Entry{Index: i + 1, Cmd: bytes.Clone(r.entries[i])})
	}
	if len(ents) == 0 {
		return nil
	}
	out, err := fr.sm.Update(ents)
	if err != nil {
		r.t.Fatalf("replica %d: Update: %v", fr.id, err)
	}
	fr.applied = ents[len(ents)-1].Index
	return out
}

// proposer is the Proposer of replica id.
func (r *fakeRaft) proposer(id uint64) Proposer { return fakeProposer{r, id} }

type fakeProposer struct {
	r  *fakeRaft
	id uint64
}

func (p fakeProposer) Propose(_ context.Context, cmd []byte) (uint64, error) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	me := r.replicas[p.id-1]
	if !me.up {
		return 0, ErrNotCommitted
	}
	r.entries = append(r.entries, bytes.Clone(cmd))
	var result uint64
	for _, fr := range r.replicas {
		if !fr.up {
			continue
		}
		out := r.catchUp(fr)
		if fr == me {
			result = out[len(out)-1].Result.Value
		}
	}
	return result, nil
}

func (p fakeProposer) ReadIndex(context.Context) error { return nil }

// recordsOf returns every record of fr's log with its offset, as text.
func recordsOf(t testing.TB, fr *fakeReplica) []string {
	t.Helper()
	var out []string
	fr.sm.mu.Lock()
	snap, err := fr.sm.log.Snapshot()
	fr.sm.mu.Unlock()
	if err != nil {
		t.Fatalf("replica %d: snapshot: %v", fr.id, err)
	}
	defer snap.Close()
	if err := snap.Replay(snap.StartOffset(), func(off int64, rec []byte) error {
		out = append(out, fmt.Sprintf("%d:%s", off, rec))
		return nil
	}); err != nil {
		t.Fatalf("replica %d: read: %v", fr.id, err)
	}
	return out
}

// shard models a shard that follows its replica's log: the records it holds, by offset.
type shardModel struct {
	t       testing.TB
	rep     *Replica
	records map[int64]string
	end     int64
}

func newShardModel(t testing.TB, rep *Replica) *shardModel {
	s := &shardModel{t: t, rep: rep}
	s.load()
	return s
}

func (s *shardModel) load() {
	s.t.Helper()
	s.records = map[int64]string{}
	_, end, err := s.rep.Load(func(off int64, rec []byte) error {
		s.records[off] = string(rec)
		return nil
	})
	if err != nil {
		s.t.Fatalf("Load: %v", err)
	}
	s.end = end
}

// follow takes what others appended (loading again when told to).
func (s *shardModel) follow() {
	s.t.Helper()
	reload, err := s.rep.Follow(func(off int64, rec []byte) error {
		if off != s.end {
			s.t.Fatalf("followed offset %d, the shard ends at %d", off, s.end)
		}
		s.records[off] = string(rec)
		s.end++
		return nil
	})
	if err != nil {
		s.t.Fatalf("Follow: %v", err)
	}
	if reload {
		s.load()
	}
}

// append appends records named after tag; it returns Append's error.
func (s *shardModel) append(tag string, n int) error {
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = fmt.Appendf(nil, "%s-%d", tag, i)
	}
	first, err := s.rep.Append(recs)
	if err != nil {
		return err
	}
	if first != s.end {
		s.t.Fatalf("Append returned offset %d, the shard ends at %d", first, s.end)
	}
	for i, r := range recs {
		s.records[first+int64(i)] = string(r)
	}
	s.end += int64(n)
	return nil
}

func (s *shardModel) list() []string {
	out := make([]string, 0, len(s.records))
	for off := s.end - int64(len(s.records)); off < s.end; off++ {
		out = append(out, fmt.Sprintf("%d:%s", off, s.records[off]))
	}
	return out
}
