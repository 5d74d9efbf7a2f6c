package raftlog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of Replica.Append. Each leaves the shard's state ahead of the log, or the log ahead of
// it: the shard loads the log again before it appends anything else.
var (
	// ErrBehind: others appended records the shard has not followed yet.
	ErrBehind = errors.New("raftlog: the log holds records the shard has not followed")
	// ErrConflict: the entry was committed, but the log no longer ended where the shard built
	// its records (another leader appended first), so no replica appended them.
	ErrConflict = errors.New("raftlog: another leader appended to the log first; the records were not appended")
	// ErrNotCommitted: the entry was not committed (this replica lost its leadership, or the
	// shard has none); it never will be.
	ErrNotCommitted = errors.New("raftlog: the entry was not committed")
	// ErrUncertain: the entry was proposed, but whether it will be committed is not known (the
	// wait timed out): it may still be appended, and the shard follows it then.
	ErrUncertain = errors.New("raftlog: the entry may or may not be committed")
)

// Proposer is what a replica needs of its Raft shard.
type Proposer interface {
	// Propose proposes cmd and waits until it is committed and applied by this replica,
	// returning the result of the apply. An error that wraps ErrNotCommitted says it never
	// will be; any other error leaves it uncertain.
	Propose(ctx context.Context, cmd []byte) (uint64, error)
	// ReadIndex returns once this replica has applied everything committed when it was called,
	// after a quorum confirmed that the shard's leader still leads.
	ReadIndex(ctx context.Context) error
}

// Replica is a state partition's log as its shard sees it on one replica of a Raft shard: the
// records of the committed entries, appended by the StateMachine. The shard loads it, follows
// the records other replicas' leaders append, and, while its replica leads, appends through a
// proposal. Methods are called from the shard's goroutine.
type Replica struct {
	sm       *StateMachine
	proposer Proposer
	timeout  time.Duration
}

// NewReplica returns the shard's view of the replica whose state machine is sm. timeout bounds
// each Append.
func NewReplica(sm *StateMachine, proposer Proposer, timeout time.Duration) *Replica {
	return &Replica{sm: sm, proposer: proposer, timeout: timeout}
}

// Load hands fn every record of the log, from its log-start offset, and returns the log's bounds
// as the shard now holds them.
func (r *Replica) Load(fn func(offset int64, record []byte) error) (start, end int64, err error) {
	return r.sm.load(fn)
}

// Follow hands fn the records others appended since the shard's last Load, Follow or Append.
// reload: the log was replaced (a snapshot from the leader); the shard must Load it again.
func (r *Replica) Follow(fn func(offset int64, record []byte) error) (reload bool, err error) {
	return r.sm.follow(fn)
}

// Changes is signalled when there may be records to follow or a log to load.
func (r *Replica) Changes() <-chan struct{} { return r.sm.tail.changed }

// Append proposes records as one entry at the end of what the shard holds, and returns the
// offset of the first once the entry is committed and this replica appended them. With no
// records it confirms that this replica's leader still leads and that the shard holds every
// committed record (a linearizable read), and returns the shard's end.
func (r *Replica) Append(records [][]byte) (first int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if len(records) == 0 {
		pos := r.sm.position()
		if err := r.proposer.ReadIndex(ctx); err != nil {
			return 0, err
		}
		// Entries applied meanwhile are the shard's to follow before it answers: what it
		// holds must be everything committed.
		if r.sm.position() != pos || r.hasPending() {
			return 0, ErrBehind
		}
		return pos, nil
	}
	p, cmd, err := r.sm.beginAppend(records)
	if err != nil {
		return 0, err
	}
	value, perr := r.proposer.Propose(ctx, cmd)
	applied := r.sm.endAppend(p)
	switch {
	case applied:
		return p.expected, nil
	case perr == nil && value == resultConflict:
		return 0, ErrConflict
	case perr == nil:
		return 0, fmt.Errorf("raftlog: the entry was refused (result %d)", value)
	case errors.Is(perr, ErrNotCommitted):
		return 0, perr
	default:
		return 0, fmt.Errorf("%w: %w", ErrUncertain, perr)
	}
}

// hasPending reports records to follow or a log to load.
func (r *Replica) hasPending() bool {
	m := r.sm
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tail.queue) > 0 || m.tail.overflow || m.tail.replaced
}

// SetStartOffset prunes the log up to off, or to where it is durable if that is lower, and
// returns the log-start offset.
func (r *Replica) SetStartOffset(off int64) (int64, error) { return r.sm.setStartOffset(off) }

// Bounds returns the log's start and end offsets and its size in bytes.
func (r *Replica) Bounds() (start, end, size int64) { return r.sm.bounds() }

// Wake signals Changes: the replica's role changed, and its shard looks again.
func (r *Replica) Wake() { r.sm.notify() }
