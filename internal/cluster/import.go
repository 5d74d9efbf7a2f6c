package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordinatord/coordinatord/internal/raftlog"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// MaxImportBytes bounds the records of one ImportRecords call: they become one Raft entry.
const MaxImportBytes = 1 << 20

// Errors of ImportRecords.
var (
	// ErrNotLeader is a call that only the state partition's leader serves, made of another
	// node; the *NotLeaderError that wraps it says who leads.
	ErrNotLeader = errors.New("cluster: this node does not lead the state partition")
	// ErrBadImport is an import whose records or offsets are not valid; the error says why.
	ErrBadImport = errors.New("cluster: invalid import")
)

// NotLeaderError is ErrNotLeader with the partition's leader as this node knows it.
type NotLeaderError struct {
	Partition int
	Leader    Coordinator
}

func (e *NotLeaderError) Error() string {
	switch {
	case e.Leader.State == CoordinatorElecting:
		return fmt.Sprintf("state partition %d has no leader yet (an election is under way)", e.Partition)
	case e.Leader.Address == "":
		return fmt.Sprintf("state partition %d is led by node %d, whose address is not known yet", e.Partition, e.Leader.Node)
	default:
		return fmt.Sprintf("state partition %d is led by node %d at %s", e.Partition, e.Leader.Node, e.Leader.Address)
	}
}

// Is makes a *NotLeaderError match ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// ImportResult is the outcome of ImportRecords: whether the records were appended, and the
// partition's log bounds after it.
type ImportResult struct {
	Appended               bool
	StartOffset, EndOffset int64
}

// ImportRecords copies records of a single-node coordinatord's state log, whose log-start
// offset is start, into state partition p, with records[0] at offset at (cluster import). At
// start they seed the partition's log, which must never have been written; past it they append
// to a log that ends at at. Either way they are one Raft entry, committed on a majority, and
// every replica holds them at the same offsets as the source; the partitions' shards load them
// as records another leader appended. Result.Appended is false, with nothing changed, when the
// log is not where the records go: the bounds then say where it is. Only the partition's leader
// serves the call (*NotLeaderError otherwise). Every record must decode as a share-group state
// record of a share partition that p owns, and fit the partition log's record limit; together
// they must not exceed MaxImportBytes.
func (n *Node) ImportRecords(ctx context.Context, p int, start, at int64, records [][]byte) (ImportResult, error) {
	if p < 0 || p >= n.cfg.Partitions {
		return ImportResult{}, fmt.Errorf("%w: %d, want [0, %d)", ErrNoSuchPartition, p, n.cfg.Partitions)
	}
	if start < 0 || at < start {
		return ImportResult{}, fmt.Errorf("%w: records at offset %d of a log starting at %d: want 0 ≤ start ≤ offset", ErrBadImport, at, start)
	}
	if err := n.checkImported(p, records); err != nil {
		return ImportResult{}, err
	}
	part := n.Partition(p)
	if part == nil || part.failed != nil || !part.Role().Leading {
		return ImportResult{}, &NotLeaderError{Partition: p, Leader: n.Coordinator(p)}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ProposalTimeout)
		defer cancel()
	}
	value, err := proposer{nh: n.nh, shardID: part.shardID}.Propose(ctx, raftlog.ImportEntry(start, at, records))
	if err != nil {
		return ImportResult{}, fmt.Errorf("cluster: import into state partition %d: %w", p, err)
	}
	s, e, _ := part.rep.Bounds()
	return ImportResult{Appended: raftlog.Appended(value), StartOffset: s, EndOffset: e}, nil
}

// checkImported refuses records that state partition p's replicas could not append or its
// shard could not load: a replica that failed to append a committed entry would stop its
// process, and a record the shard cannot decode would fail the partition.
func (n *Node) checkImported(p int, records [][]byte) error {
	_, opts := n.cfg.PartitionLog(p)
	limit := opts.MaxRecordBytes
	if limit <= 0 {
		limit = statelog.DefaultMaxRecordBytes
	}
	total := 0
	for i, b := range records {
		total += len(b)
		if total > MaxImportBytes {
			return fmt.Errorf("%w: the records exceed %d bytes; send at most that many at a time", ErrBadImport, MaxImportBytes)
		}
		if len(b) > limit {
			return fmt.Errorf("%w: record %d has %d bytes, above the log's limit of %d", ErrBadImport, i, len(b), limit)
		}
		r, err := record.Decode(b)
		if err != nil {
			return fmt.Errorf("%w: record %d is no share-group state record: %w", ErrBadImport, i, err)
		}
		key := shard.Key(r.Key).CoordinatorKey()
		if owner := shard.PartitionFor(key, n.cfg.Partitions); owner != p {
			return fmt.Errorf("%w: record %d is of share partition %s, which state partition %d owns among %d, not %d: "+
				"the source must have the cluster's number of state partitions", ErrBadImport, i, key, owner, n.cfg.Partitions, p)
		}
	}
	return nil
}
