package shard

import "errors"

// Shard-specific INVALID_REQUEST messages, word for word as Kafka's ShareCoordinatorShard sends
// them.
const (
	msgNegativePartition  = "The partition id cannot be a negative number."
	msgNegativeLeader     = "The leader epoch cannot be a negative number."
	msgNegativeState      = "The state epoch cannot be a negative number."
	msgWriteUninitialized = "Write operation on uninitialized share partition not allowed."
	msgReadUninitialized  = "Read operation on uninitialized share partition not allowed."
)

// Errors returned by Prune, SnapshotColdPartitions and WaitLoaded when the shard cannot serve.
var (
	// ErrLoading means the shard is replaying its log.
	ErrLoading = errors.New("shard is loading")
	// ErrNotAvailable means the shard failed (load or reload) and is not serving.
	ErrNotAvailable = errors.New("shard is not available")
	// ErrClosed means the shard was closed.
	ErrClosed = errors.New("shard is closed")
)
