package workload

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/shard"
)

// OffsetsPerBatch is the number of record offsets one state batch covers.
const OffsetsPerBatch = 10

// Delivery states the generated batches alternate between (Kafka's bytes).
const (
	stateAcknowledged int8 = 2
	stateArchived     int8 = 4
)

// DefaultTopic is the topic id of the generated share partitions.
var DefaultTopic = record.TopicID{0x3f, 0xa8, 0x5f, 0x64, 0x57, 0x17, 0x45, 0x62, 0xb3, 0xfc, 0x2c, 0x96, 0x3f, 0x66, 0xaf, 0xa6}

// FixedLimit is a shard.Provider answering the same snapshot limit
// (share.snapshot.update.records.per.snapshot) for every group.
type FixedLimit int

// SnapshotUpdateRecordsPerSnapshot returns the limit, whatever the group.
func (f FixedLimit) SnapshotUpdateRecordsPerSnapshot(string) int { return int(f) }

// Shape is the shape of a workload.
type Shape struct {
	GroupID         string // group of every generated share partition
	SharePartitions int    // share partitions written, round-robin
	StateBatches    int    // state batches each share partition holds once its window is full
	BatchesPerWrite int    // state batches each write carries
}

// Validate reports every invalid field at once.
func (s Shape) Validate() error {
	var errs []error
	if s.GroupID == "" {
		errs = append(errs, errors.New("group: want a group id"))
	}
	if s.SharePartitions < 1 {
		errs = append(errs, fmt.Errorf("share partitions %d: want at least 1", s.SharePartitions))
	}
	if s.StateBatches < 1 {
		errs = append(errs, fmt.Errorf("state batches per share partition %d: want at least 1", s.StateBatches))
	}
	if s.BatchesPerWrite < 1 {
		errs = append(errs, fmt.Errorf("batches per write %d: want at least 1", s.BatchesPerWrite))
	}
	if s.BatchesPerWrite > s.StateBatches {
		errs = append(errs, fmt.Errorf("batches per write %d: want at most the state batches per share partition (%d)", s.BatchesPerWrite, s.StateBatches))
	}
	return errors.Join(errs...)
}

// String is the shape as the reports print it.
func (s Shape) String() string {
	return strconv.Itoa(s.SharePartitions) + " share partitions × " + strconv.Itoa(s.StateBatches) +
		" state batches, " + strconv.Itoa(s.BatchesPerWrite) + " batches per write"
}

// Key returns the key of share partition i (0 ≤ i < SharePartitions).
func (s Shape) Key(i int) shard.Key {
	return shard.Key{GroupID: s.GroupID, TopicID: DefaultTopic, Partition: int32(i)}
}

// Partition is the generator of one share partition's writes. It is not safe for concurrent use:
// give each share partition to one goroutine.
type Partition struct {
	shape   Shape
	key     shard.Key
	batches int64 // batches written so far
}

// NewPartition returns the generator of share partition i.
func (s Shape) NewPartition(i int) *Partition {
	return &Partition{shape: s, key: s.Key(i)}
}

// Key is the share partition's key.
func (p *Partition) Key() shard.Key { return p.key }

// Batches is the number of state batches the share partition's requests have carried so far.
func (p *Partition) Batches() int64 { return p.batches }

// Initialize is the request that creates the share partition's state (state epoch 1, start
// offset 0).
func (p *Partition) Initialize() shard.InitializeRequest {
	return shard.InitializeRequest{Key: p.key, StateEpoch: 1, StartOffset: 0}
}

// Next returns the next write: BatchesPerWrite new batches after the previous ones, and a start
// offset that keeps the newest StateBatches batches. dst is reused for the batches when large
// enough.
func (p *Partition) Next(dst []shard.StateBatch) shard.WriteRequest {
	n := p.shape.BatchesPerWrite
	if cap(dst) < n {
		dst = make([]shard.StateBatch, n)
	}
	dst = dst[:n]
	for i := range dst {
		idx := p.batches + int64(i)
		first := idx * OffsetsPerBatch
		state := stateAcknowledged
		if idx%2 == 1 {
			state = stateArchived
		}
		dst[i] = shard.StateBatch{FirstOffset: first, LastOffset: first + OffsetsPerBatch - 1, DeliveryState: state, DeliveryCount: 1}
	}
	p.batches += int64(n)
	start := max(p.batches-int64(p.shape.StateBatches), 0) * OffsetsPerBatch
	return shard.WriteRequest{
		Key: p.key, StateEpoch: 1, LeaderEpoch: 1, StartOffset: start,
		DeliveryCompleteCount: int32(n * OffsetsPerBatch), StateBatches: dst,
	}
}
