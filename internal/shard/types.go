package shard

import (
	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/record"
)

// StateBatch is one range of offsets with its delivery information, as requests, results and
// records all carry it: the stored batch itself (record.StateBatch), so that a write's batches go
// into its record and a record's into the state without a conversion.
type StateBatch = record.StateBatch

// InitializeRequest is one key of InitializeShareGroupState (Kafka's initializeState). StartOffset
// -1 means "not initialized yet".
type InitializeRequest struct {
	Key         Key
	StateEpoch  int32
	StartOffset int64
}

// ReadRequest is one key of ReadShareGroupState (Kafka's readStateAndMaybeUpdateLeaderEpoch).
type ReadRequest struct {
	Key         Key
	LeaderEpoch int32
	// Take, when set, is given the key's state batches on the shard's goroutine as the read is
	// applied, in place of the copy that ReadResult.StateBatches would hold (it stays nil), so
	// that a caller can encode a large state without a copy of it in between. It must neither keep
	// nor change batches, and should be quick: the shard waits for it. A Result it returns refuses
	// the read, which then changes nothing (no leader epoch is raised) and is answered with it.
	Take func(batches []StateBatch) *Result
}

// WriteRequest is one key of WriteShareGroupState (Kafka's writeState). StartOffset -1 means "not
// being written"; DeliveryCompleteCount -1 means "unknown".
type WriteRequest struct {
	Key                   Key
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
	StateBatches          []StateBatch
}

// DeleteRequest is one key of DeleteShareGroupState (Kafka's deleteState).
type DeleteRequest struct {
	Key Key
}

// SummaryRequest is one key of ReadShareGroupStateSummary (Kafka's readStateSummary). LeaderEpoch
// is accepted and ignored, as Kafka does.
type SummaryRequest struct {
	Key         Key
	LeaderEpoch int32
}

// Result is the per-key outcome of an operation. Message "" means none.
type Result struct {
	Code    kafkaerr.Code
	Message string
}

// ReadResult is the outcome of Read; the state fields are set only when Code is kafkaerr.None.
type ReadResult struct {
	Result
	StateEpoch   int32
	StartOffset  int64
	StateBatches []StateBatch
}

// SummaryResult is the outcome of ReadSummary; the state fields are set only when Code is
// kafkaerr.None (an absent key reports the sentinels StateEpoch 0, LeaderEpoch 0, StartOffset -1,
// DeliveryCompleteCount -1).
type SummaryResult struct {
	Result
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
}

// Provider supplies the per-group snapshot limit: the number of update records written between
// two snapshots of one share partition (groupcfg.Manager implements it). It is read at the moment
// each record is chosen and must be cheap and safe for concurrent use.
type Provider interface {
	SnapshotUpdateRecordsPerSnapshot(groupID string) int
}
