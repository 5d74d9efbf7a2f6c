package shard

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
)

// Log is the log that holds a shard's records, as the shard uses it: LocalLog's on one node, a
// replica's of a Raft shard in a cluster. Its methods are called from the shard's goroutine;
// StartOffset, EndOffset and Size from any goroutine.
type Log interface {
	// Append appends records as one atomic batch after the last record the shard holds and
	// returns, once they are durable, the offset of the first; offsets are dense. Without
	// records it returns the end offset once the shard is known to hold every record of the log
	// (a replicated log confirms that no other replica appended since), so that a read answered
	// after it is current. An error means the records are not known to be durable: the shard's
	// state may be ahead of the log, or the log ahead of it, and the shard loads the log again.
	Append(records [][]byte) (first int64, err error)
	// SetStartOffset moves the log-start offset forward to off, or less far if the log cannot
	// drop records up to off yet, and returns the log-start offset then.
	SetStartOffset(off int64) (int64, error)
	// StartOffset, EndOffset and Size are the log's bounds and its bytes on disk.
	StartOffset() int64
	EndOffset() int64
	Size() int64
	// Close closes the log.
	Close() error
}

// LogOpener opens a shard's log, each time the shard loads it: when it starts and after the log
// failed under it.
type LogOpener interface {
	// Open opens the log and hands fn its records from the log-start offset, in order (record
	// is valid until fn returns). On error no Log is returned, and the shard discards what fn
	// built; an error fn returned is returned as it is.
	Open(fn func(offset int64, record []byte) error) (Log, error)
	// MaxRecordBytes bounds one record of the log.
	MaxRecordBytes() int
	// Failed is closed once the log has failed other than through the shard's calls (a failed
	// sync of a file system it shares with other logs), after which Err says why; nil: never.
	Failed() <-chan struct{}
	Err() error
	// Close is called once, when the shard stops for good, after it closed its last Log.
	Close() error
}

// Action is what a shard does after its log failed. The log says which by returning a
// *LogError; any other error is ActionRetry.
//
//	action          the log                                   the shard                          its clients are told
//	ActionRetry     failed to open, or under an append        loads it again, with backoff       LOAD_IN_PROGRESS / NOT_AVAILABLE
//	ActionRepair    is damaged                                 stays Failed until a restart       NOT_AVAILABLE: waits for an operator
//	ActionUpgrade   holds a format this release cannot read    stays Failed until a restart       NOT_AVAILABLE: written by a newer release
//	ActionRestart   cannot vouch for what the disk holds       stays Failed; the process must     NOT_AVAILABLE: the server must be restarted
//	                (a failed sync of its file system, or            restart (after the page cache
//	                of what a load found)                            is dropped)
//
// A failed append is always followed by a reload (which fails again, with the same action, if
// the log still cannot be used). Repeated append failures space the reloads out.
type Action int

// The actions.
const (
	ActionRetry Action = iota
	ActionRepair
	ActionUpgrade
	ActionRestart
)

// LogError is an error of a Log or LogOpener that says what the shard does about it.
type LogError struct {
	Action Action
	// Client says what failed, in a few words for a client ("its state log is damaged and waits
	// for an operator"); file names and offsets go to the server log and /readyz only.
	Client string
	// Advice is the operator's instruction the shard logs with the error ("" for none).
	Advice string
	Err    error
}

// Error returns the underlying error's text.
func (e *LogError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *LogError) Unwrap() error { return e.Err }

// failure is what the shard does about err, what its clients are told and what the operator is
// advised: the decision of the table above, made here and nowhere else.
func failure(err error) (Action, string, string) {
	var le *LogError
	switch {
	case errors.As(err, &le):
		return le.Action, le.Client, le.Advice
	case errors.Is(err, record.ErrUnknownValueVersion):
		return ActionUpgrade, "its state log holds data in a format this release does not read (written by a newer coordinatord)",
			"its log holds data in a format this release does not read, written by a newer coordinatord; run that release or a later one"
	}
	cause := ""
	if errno := syscall.Errno(0); errors.As(err, &errno) {
		cause = " (" + errno.Error() + ")"
	}
	return ActionRetry, "a storage error" + cause + "; the server log has the details", ""
}

// Replicated is implemented by the LogOpener of a log that other replicas append to as well (a
// state partition replicated with Raft): the shard serves only while its replica leads, and
// otherwise follows what the leader appends, so that it is ready to lead with its state loaded.
type Replicated interface {
	// Changes is signalled when there may be records to follow, the log was replaced, or the
	// replica's role changed.
	Changes() <-chan struct{}
	// Follow hands fn, in order, the records others appended since the shard last loaded the
	// log, followed it or appended to it. reload: the log was replaced (the replica received
	// another's log); the shard loads it again.
	Follow(fn func(offset int64, record []byte) error) (reload bool, err error)
	// Role is the replica's role now; safe for concurrent use.
	Role() Role
}

// Role is what a shard's replica is in its replicated log.
type Role struct {
	// Leading: the replica leads, and has confirmed that it holds every committed record: the
	// shard serves.
	Leading bool
	// CatchingUp: the replica was elected and confirms that it holds every committed record.
	CatchingUp bool
	// LeaderNode and LeaderAddress name the leader when one is known (0 and "" otherwise).
	LeaderNode    int64
	LeaderAddress string
}

// NotLeading is the answer to an operation of state partition partition on a node that does not
// lead it: NOT_COORDINATOR naming the leader, COORDINATOR_LOAD_IN_PROGRESS while the node
// catches up after its election, and COORDINATOR_NOT_AVAILABLE while there is no leader.
func NotLeading(partition int, r Role) Result { return roleResult(partition, r) }

func roleResult(partition int, r Role) Result {
	switch {
	case r.CatchingUp:
		return Result{Code: kafkaerr.CoordinatorLoadInProgress, Message: fmt.Sprintf(
			"The coordinator is loading: this node was elected leader of state partition %d and makes sure it holds every committed record.", partition)}
	case r.LeaderNode != 0 && r.LeaderAddress != "":
		return Result{Code: kafkaerr.NotCoordinator, Message: fmt.Sprintf(
			"This is not the correct coordinator: state partition %d is led by node %d (%s).", partition, r.LeaderNode, r.LeaderAddress)}
	case r.LeaderNode != 0:
		return Result{Code: kafkaerr.NotCoordinator, Message: fmt.Sprintf(
			"This is not the correct coordinator: state partition %d is led by node %d.", partition, r.LeaderNode)}
	}
	return Result{Code: kafkaerr.CoordinatorNotAvailable, Message: fmt.Sprintf(
		"The coordinator is not available: state partition %d has no leader; an election is under way.", partition)}
}
