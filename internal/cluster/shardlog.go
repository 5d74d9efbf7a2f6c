package cluster

import (
	"errors"

	"github.com/coordinatord/coordinatord/internal/raftlog"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// ShardLog returns the log the partition's shard uses on this node: its replica's, which it
// loads, follows while another node leads and appends to while this one does.
func (p *Partition) ShardLog() shard.LogOpener { return &shardLog{p: p} }

// shardLog is a Partition as the shard's LogOpener and Replicated.
type shardLog struct{ p *Partition }

var (
	_ shard.LogOpener  = (*shardLog)(nil)
	_ shard.Replicated = (*shardLog)(nil)
)

func (l *shardLog) Open(fn func(offset int64, record []byte) error) (shard.Log, error) {
	if err := l.p.failed; err != nil {
		return nil, shard.StatelogError(err)
	}
	if _, _, err := l.p.rep.Load(fn); err != nil {
		if errors.Is(err, raftlog.ErrReplaced) {
			// The leader's log arrived during the load: load the new one.
			return nil, &shard.LogError{Action: shard.ActionRetry, Client: "the replica is receiving its leader's log", Err: err}
		}
		return nil, shard.StatelogError(err)
	}
	return replicaLog{rep: l.p.rep}, nil
}

func (l *shardLog) MaxRecordBytes() int {
	_, opts := l.p.node.cfg.PartitionLog(l.p.index)
	if opts.MaxRecordBytes > 0 {
		return opts.MaxRecordBytes
	}
	return statelog.DefaultMaxRecordBytes
}

// Failed is nil: a replica's log that fails under a committed entry stops the process
// (Config.Fatal), and a replica whose log cannot be opened does not start (Open fails).
func (l *shardLog) Failed() <-chan struct{} { return nil }
func (l *shardLog) Err() error              { return nil }
func (l *shardLog) Close() error            { return nil }

func (l *shardLog) Changes() <-chan struct{} { return l.p.rep.Changes() }

func (l *shardLog) Follow(fn func(offset int64, record []byte) error) (bool, error) {
	return l.p.rep.Follow(fn)
}

func (l *shardLog) Role() shard.Role {
	r := l.p.Role()
	role := shard.Role{Leading: r.Leading, CatchingUp: r.Confirming, LeaderNode: int64(r.Leader)}
	if r.Leader != 0 && !r.Leading {
		role.LeaderAddress = l.p.node.Coordinator(l.p.index).Address
	}
	return role
}

// replicaLog is one load of the replica's log.
type replicaLog struct{ rep *raftlog.Replica }

func (l replicaLog) Append(records [][]byte) (int64, error) {
	first, err := l.rep.Append(records)
	if err != nil {
		return 0, appendError(err)
	}
	return first, nil
}

// appendError says what a failed replicated append means for the shard and its clients: the
// shard loads its log again in every case.
func appendError(err error) error {
	client := "its replicas could not confirm it (the server log has the details)"
	switch {
	case errors.Is(err, raftlog.ErrNotCommitted):
		client = "the partition's leadership changed before the write was committed; it was not applied"
	case errors.Is(err, raftlog.ErrConflict), errors.Is(err, raftlog.ErrBehind):
		client = "another leader appended to the partition's log first; the write was not applied"
	case errors.Is(err, raftlog.ErrUncertain):
		client = "its replicas did not confirm the write in time; it may still be applied"
	}
	return &shard.LogError{Action: shard.ActionRetry, Client: client, Err: err}
}

func (l replicaLog) SetStartOffset(off int64) (int64, error) {
	start, err := l.rep.SetStartOffset(off)
	return start, shard.StatelogError(err)
}

func (l replicaLog) StartOffset() int64 { start, _, _ := l.rep.Bounds(); return start }
func (l replicaLog) EndOffset() int64   { _, end, _ := l.rep.Bounds(); return end }
func (l replicaLog) Size() int64        { _, _, size := l.rep.Bounds(); return size }
func (l replicaLog) Close() error       { return nil }
