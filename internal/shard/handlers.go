package shard

import (
	"fmt"
	"sort"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
)

// The operation handlers of Kafka's ShareCoordinatorShard, in Kafka's validation order. Each
// validates against the current (possibly uncommitted) state, then produces at most one record into
// p and replays it. Kafka's metadata checks (UNKNOWN_TOPIC_OR_PARTITION) are not made: a standalone
// coordinator has no cluster metadata (DESIGN.md).
//
// Validation beyond Kafka's (INVALID_REQUEST with a message) runs right after Kafka's own checks of
// the request fields and before any check that reads the state, so a malformed request gets the
// same answer whatever the state: start offset < -1, delivery complete count < -1, and per state
// batch a negative first offset, first > last, a delivery state outside {0, 1, 2, 4} or a negative
// delivery count. A group id longer than a record key can hold (32767 bytes) cannot have state, so
// Initialize rejects it and the other operations treat the key as absent.

func invalid(msg string) Result { return Result{Code: kafkaerr.InvalidRequest, Message: msg} }

func withDefault(c kafkaerr.Code) Result { return Result{Code: c, Message: c.DefaultMessage()} }

// opVerb is the verb Kafka's ShareCoordinatorService puts in the message of a failed operation:
// "Unable to <verb> share group state: <cause>".
type opVerb string

// The verbs of the operations that produce records.
const (
	verbInitialize opVerb = "initialize"
	verbRead       opVerb = "read"
	verbWrite      opVerb = "write"
	verbDelete     opVerb = "delete"
)

// generationFailed is the result of operation verb on k whose record could not be produced (a
// record over the log's record limit); Kafka fails such an operation with UNKNOWN_SERVER_ERROR
// (MESSAGE_TOO_LARGE inside its coordinator runtime) and the message its service gives that RPC's
// failures. It is logged: the key cannot take another snapshot until its state shrinks or it is
// deleted.
func (m *machine) generationFailed(k Key, verb opVerb, err error) Result {
	m.logger.Warn("cannot write the state record of a share partition; the operation is refused",
		zap.Stringer("key", k), zap.String("operation", string(verb)), zap.Error(err))
	return Result{Code: kafkaerr.UnknownServerError, Message: "Unable to " + string(verb) + " share group state: " + err.Error()}
}

const msgNegativeStartOffset = "The start offset cannot be less than -1."

// The answers to a state batch with a delivery state or count a write cannot hold (format
// arguments: the batch's index, the value). The service uses them too, for values too large for
// Kafka's int8 and int16 fields, so that a client reads one message whatever the value.
const (
	MsgBadDeliveryState = "State batch %d has delivery state %d; the valid states are 0 (available), 1 (acquired), 2 (acknowledged) and 4 (archived)."
	MsgBadDeliveryCount = "State batch %d has delivery count %d; the valid counts are 0 to 32767."
)

// CheckWrite returns the answer to a write that its fields alone make invalid, whatever the state
// (Kafka's checks of the request, then validateWriteFields'), or the zero Result. A partition
// makes these checks first; a caller that refuses a write before handing it over (for a value that
// its fields cannot hold) calls it to answer in the same order.
func CheckWrite(r *WriteRequest) Result {
	switch {
	case r.Key.Partition < 0:
		return invalid(msgNegativePartition)
	case r.LeaderEpoch < 0:
		return invalid(msgNegativeLeader)
	case r.StateEpoch < 0:
		return invalid(msgNegativeState)
	}
	if msg := validateWriteFields(r); msg != "" {
		return invalid(msg)
	}
	return Result{}
}

// validateWriteFields is the extra validation of a write's fields.
func validateWriteFields(r *WriteRequest) string {
	if r.StartOffset < -1 {
		return msgNegativeStartOffset
	}
	if r.DeliveryCompleteCount < -1 {
		return "The delivery complete count cannot be less than -1."
	}
	for i := range r.StateBatches {
		s := &r.StateBatches[i]
		switch {
		case s.FirstOffset < 0:
			return fmt.Sprintf("State batch %d has a negative first offset %d.", i, s.FirstOffset)
		case s.FirstOffset > s.LastOffset:
			return fmt.Sprintf("State batch %d has first offset %d greater than last offset %d.", i, s.FirstOffset, s.LastOffset)
		case s.DeliveryState != 0 && s.DeliveryState != 1 && s.DeliveryState != 2 && s.DeliveryState != 4:
			return fmt.Sprintf(MsgBadDeliveryState, i, s.DeliveryState)
		case s.DeliveryCount < 0:
			return fmt.Sprintf(MsgBadDeliveryCount, i, s.DeliveryCount)
		}
	}
	return ""
}

// lookup returns the state of k (nil when absent or unrepresentable).
func (m *machine) lookup(k Key) *entry {
	mk, err := record.EncodeKey(record.Key(k))
	if err != nil {
		return nil
	}
	return m.states[mk]
}

// write is writeState.
func (m *machine) write(r *WriteRequest, p *pending) Result {
	if res := CheckWrite(r); res.Code != kafkaerr.None {
		return res
	}
	e := m.lookup(r.Key)
	if e == nil {
		return invalid(msgWriteUninitialized)
	}
	if e.maxLeaderEpoch > r.LeaderEpoch {
		return withDefault(kafkaerr.FencedLeaderEpoch)
	}
	if e.flags&flagStateEpoch != 0 && e.maxStateEpoch > r.StateEpoch {
		return withDefault(kafkaerr.FencedStateEpoch)
	}
	if err := m.writeShareState(p, e, r, false); err != nil {
		return m.generationFailed(r.Key, verbWrite, err)
	}
	return Result{}
}

// read is readStateAndMaybeUpdateLeaderEpoch.
func (m *machine) read(r *ReadRequest, p *pending) ReadResult {
	switch {
	case r.Key.Partition < 0:
		return ReadResult{Result: invalid(msgNegativePartition)}
	case r.LeaderEpoch < 0:
		return ReadResult{Result: invalid(msgNegativeLeader)}
	}
	e := m.lookup(r.Key)
	if e == nil {
		return ReadResult{Result: invalid(msgReadUninitialized)}
	}
	if e.maxLeaderEpoch > r.LeaderEpoch {
		return ReadResult{Result: withDefault(kafkaerr.FencedLeaderEpoch)}
	}
	res := ReadResult{StateEpoch: e.stateEpoch, StartOffset: e.startOffset}
	if r.Take == nil {
		res.StateBatches = cloneBatches(e.batches)
	} else if refused := r.Take(e.batches); refused != nil {
		return ReadResult{Result: *refused}
	}
	if e.maxLeaderEpoch == r.LeaderEpoch {
		return res
	}
	// A higher leader epoch: the new share-partition leader claims the state with a record.
	m.logger.Info("read raises the leader epoch", zap.Stringer("key", Key(record.DecodeKey(e.key))), zap.Int32("leader_epoch", r.LeaderEpoch))
	claim := WriteRequest{
		Key: r.Key, LeaderEpoch: r.LeaderEpoch, StateEpoch: e.stateEpoch,
		StartOffset: e.startOffset, DeliveryCompleteCount: e.dcc,
	}
	if err := m.writeShareState(p, e, &claim, true); err != nil {
		return ReadResult{Result: m.generationFailed(r.Key, verbRead, err)}
	}
	return res
}

// writeShareState is generateShareStateRecord: one update, or a snapshot once the key
// has had limit updates since its last snapshot, limit read from the provider now.
func (m *machine) writeShareState(p *pending, e *entry, r *WriteRequest, updateLeaderEpoch bool) error {
	leaderEpoch := e.leaderEpoch
	if updateLeaderEpoch {
		leaderEpoch = r.LeaderEpoch
	}
	startOffset := max(r.StartOffset, e.startOffset)
	dcc := r.DeliveryCompleteCount
	switch {
	case r.StartOffset == e.startOffset:
		dcc = max(r.DeliveryCompleteCount, e.dcc)
	case r.StartOffset < e.startOffset:
		dcc = e.dcc
	}
	count := int32(0)
	if e.flags&flagUpdateCount != 0 {
		count = e.updateCount
	}
	if int(count) >= m.limit(e.key) {
		now := m.now().UnixMilli()
		v := record.SnapshotValue{
			SnapshotEpoch: e.snapshotEpoch + 1, StateEpoch: e.stateEpoch, LeaderEpoch: leaderEpoch,
			StartOffset: startOffset, CreateTimestamp: now, WriteTimestamp: now,
			StateBatches: m.comb.combineBatches(e.batches, r.StateBatches, startOffset), DeliveryCompleteCount: dcc,
		}
		return m.writeSnapshot(p, e.key, e, &v)
	}
	v := record.UpdateValue{
		SnapshotEpoch: e.snapshotEpoch, LeaderEpoch: leaderEpoch, StartOffset: startOffset,
		StateBatches: m.comb.combineBatches(nil, r.StateBatches, startOffset), DeliveryCompleteCount: dcc,
	}
	// Kafka finds a state too large for a snapshot only at the next snapshot, which lets it grow
	// to hundreds of times the record limit meanwhile (one update of up to a record per write):
	// a write that would leave more batches than before, and more than a snapshot can hold, is
	// refused. Writes that do not grow the state still go through, so that it can shrink. Each
	// new batch adds at most two (it can split one), so the merge is counted, over the region it
	// touches, only when that could pass the limit.
	if m.maxRecord > 0 && len(v.StateBatches) > 0 &&
		record.SnapshotSizeBound(e.key, len(e.batches)+2*len(v.StateBatches), dcc) > m.maxRecord {
		n := m.comb.mergedLen(e.batches, e.flags&flagCanonical != 0, v.StateBatches, startOffset)
		if n > len(e.batches) && record.SnapshotSizeBound(e.key, n, dcc) > m.maxRecord {
			return errStateTooLarge{batches: n, limit: m.maxRecord}
		}
	}
	return m.writeUpdate(p, e, &v)
}

// summary is readStateSummary: no fencing, sentinels for an absent key.
func (m *machine) summary(r *SummaryRequest) SummaryResult {
	if r.Key.Partition < 0 {
		return SummaryResult{Result: invalid(msgNegativePartition)}
	}
	e := m.lookup(r.Key)
	if e == nil {
		return SummaryResult{StartOffset: -1, DeliveryCompleteCount: -1}
	}
	return SummaryResult{StateEpoch: e.stateEpoch, LeaderEpoch: e.leaderEpoch, StartOffset: e.startOffset, DeliveryCompleteCount: e.dcc}
}

// initialize is initializeState.
func (m *machine) initialize(r *InitializeRequest, p *pending) Result {
	switch {
	case r.Key.Partition < 0:
		return invalid(msgNegativePartition)
	case r.StateEpoch < 0:
		return invalid(msgNegativeState)
	case r.StartOffset < -1:
		return invalid(msgNegativeStartOffset)
	}
	mk, err := record.EncodeKey(record.Key(r.Key))
	if err != nil {
		return invalid("The " + err.Error() + ".")
	}
	e := m.states[mk]
	if e != nil && e.flags&flagStateEpoch != 0 {
		if e.maxStateEpoch > r.StateEpoch {
			return withDefault(kafkaerr.FencedStateEpoch)
		}
		if e.maxStateEpoch == r.StateEpoch && e.startOffset == r.StartOffset {
			return Result{} // a retried initialize (#23190)
		}
	}
	snapshotEpoch := int32(0)
	if e != nil {
		snapshotEpoch = e.snapshotEpoch + 1
	}
	dcc := int32(0)
	if r.StartOffset == -1 {
		dcc = -1
	}
	now := m.now().UnixMilli()
	v := record.SnapshotValue{
		SnapshotEpoch: snapshotEpoch, StateEpoch: r.StateEpoch, LeaderEpoch: 0,
		StartOffset: r.StartOffset, CreateTimestamp: now, WriteTimestamp: now, DeliveryCompleteCount: dcc,
	}
	if err := m.writeSnapshot(p, mk, e, &v); err != nil {
		return m.generationFailed(r.Key, verbInitialize, err)
	}
	return Result{}
}

// delete is deleteState: a tombstone, or success without a record when absent.
func (m *machine) delete(r *DeleteRequest, p *pending) Result {
	if r.Key.Partition < 0 {
		return invalid(msgNegativePartition)
	}
	e := m.lookup(r.Key)
	if e == nil {
		m.logger.Warn("delete of a share partition that has no state", zap.Stringer("key", r.Key))
		return Result{}
	}
	if err := m.writeTombstone(p, e); err != nil {
		return m.generationFailed(r.Key, verbDelete, err)
	}
	return Result{}
}

// coldJob is a cold-partition snapshot job (Kafka's snapshotColdPartitions) in progress: the keys
// found cold when it started, written a few at a time so that the shard can
// serve other operations between its commits.
type coldJob struct {
	keys    []string
	next    int   // index in keys of the next key to snapshot
	now     int64 // the job's clock reading (ms): coldness and the snapshots' write timestamp
	written int   // snapshot records written so far
}

// startCold begins snapshotColdPartitions: unless every key's latest snapshot is itself a cold
// snapshot (the shard is quiet), it collects every key whose last snapshot is at least the
// interval old. The order is deterministic and oldest snapshot first (the offsets list's), so
// that a Prune call between the job's commits can already advance (the prune timer waits for the
// job's end); keys that never had a snapshot (a replayed update without one) come first, in
// map-key order. It returns nil when there is
// nothing to write.
func (m *machine) startCold() *coldJob {
	now := m.now().UnixMilli()
	interval := m.coldInterval.Milliseconds()
	cold := 0
	var keys []string
	for k, e := range m.states {
		if e.createTS != e.writeTS {
			cold++
		}
		if e.flags&flagInOffsets == 0 && now-e.writeTS >= interval {
			keys = append(keys, k)
		}
	}
	if cold == len(m.states) {
		return nil
	}
	sort.Strings(keys)
	for e := m.offsets.head; e != nil; e = e.next {
		if now-e.writeTS >= interval {
			keys = append(keys, e.key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return &coldJob{keys: keys, now: now}
}

// coldStep re-snapshots the next keys of j, keeping createTimestamp, until p holds maxRecords
// records or maxBytes bytes; it reports whether j is done. Operations applied between steps can
// delete a key or give it a fresh snapshot: such a key is skipped, as the job would not have
// picked it had it started after them. A key still cold gets a copy of its current state.
func (m *machine) coldStep(j *coldJob, p *pending, maxRecords, maxBytes int) bool {
	interval := m.coldInterval.Milliseconds()
	for ; j.next < len(j.keys) && p.len() < maxRecords && len(p.buf) < maxBytes; j.next++ {
		k := j.keys[j.next]
		e := m.states[k]
		if e == nil || j.now-e.writeTS < interval {
			continue
		}
		v := e.snapshotOf()
		v.SnapshotEpoch++
		v.WriteTimestamp = j.now
		if err := m.writeSnapshot(p, k, e, &v); err != nil {
			m.logger.Error("cannot write cold snapshot", zap.Stringer("key", Key(record.DecodeKey(k))), zap.Error(err))
			continue
		}
		j.written++
	}
	if j.next < len(j.keys) {
		return false
	}
	j.keys = nil
	return true
}
