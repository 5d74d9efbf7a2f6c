package shard

import (
	"errors"
	"strconv"
)

// ErrorCode is a Kafka error code; the numbers equal Kafka's so they travel unchanged.
type ErrorCode int16

// Kafka error codes used by the share coordinator.
const (
	ErrNone                       ErrorCode = 0
	ErrUnknownServerError         ErrorCode = -1
	ErrUnknownTopicOrPartition    ErrorCode = 3
	ErrRequestTimedOut            ErrorCode = 7
	ErrCoordinatorLoadInProgress  ErrorCode = 14
	ErrCoordinatorNotAvailable    ErrorCode = 15
	ErrNotCoordinator             ErrorCode = 16
	ErrGroupAuthorizationFailed   ErrorCode = 30
	ErrClusterAuthorizationFailed ErrorCode = 31
	ErrInvalidConfig              ErrorCode = 40
	ErrInvalidRequest             ErrorCode = 42
	ErrGroupIDNotFound            ErrorCode = 69
	ErrFencedLeaderEpoch          ErrorCode = 74
	ErrFencedStateEpoch           ErrorCode = 124
)

var errorCodeNames = map[ErrorCode]string{
	ErrNone:                       "NONE",
	ErrUnknownServerError:         "UNKNOWN_SERVER_ERROR",
	ErrUnknownTopicOrPartition:    "UNKNOWN_TOPIC_OR_PARTITION",
	ErrRequestTimedOut:            "REQUEST_TIMED_OUT",
	ErrCoordinatorLoadInProgress:  "COORDINATOR_LOAD_IN_PROGRESS",
	ErrCoordinatorNotAvailable:    "COORDINATOR_NOT_AVAILABLE",
	ErrNotCoordinator:             "NOT_COORDINATOR",
	ErrGroupAuthorizationFailed:   "GROUP_AUTHORIZATION_FAILED",
	ErrClusterAuthorizationFailed: "CLUSTER_AUTHORIZATION_FAILED",
	ErrInvalidConfig:              "INVALID_CONFIG",
	ErrInvalidRequest:             "INVALID_REQUEST",
	ErrGroupIDNotFound:            "GROUP_ID_NOT_FOUND",
	ErrFencedLeaderEpoch:          "FENCED_LEADER_EPOCH",
	ErrFencedStateEpoch:           "FENCED_STATE_EPOCH",
}

// Kafka's default messages (Errors.java), used when an error carries no message of its own.
var errorCodeMessages = map[ErrorCode]string{
	ErrUnknownServerError:         "The server experienced an unexpected error when processing the request.",
	ErrUnknownTopicOrPartition:    "This server does not host this topic-partition.",
	ErrRequestTimedOut:            "The request timed out.",
	ErrCoordinatorLoadInProgress:  "The coordinator is loading and hence can't process requests.",
	ErrCoordinatorNotAvailable:    "The coordinator is not available.",
	ErrNotCoordinator:             "This is not the correct coordinator.",
	ErrGroupAuthorizationFailed:   "Group authorization failed.",
	ErrClusterAuthorizationFailed: "Cluster authorization failed.",
	ErrInvalidConfig:              "Configuration is invalid.",
	ErrInvalidRequest:             "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
	ErrGroupIDNotFound:            "The group id does not exist.",
	ErrFencedLeaderEpoch:          "The leader epoch in the request is older than the epoch on the broker.",
	ErrFencedStateEpoch:           "The coordinator rejected the request because the state epoch did not match.",
}

// String returns Kafka's name of the code (e.g. "FENCED_STATE_EPOCH"), or "ERROR_CODE(n)" for a
// code this package does not know.
func (c ErrorCode) String() string {
	if n, ok := errorCodeNames[c]; ok {
		return n
	}
	return "ERROR_CODE(" + strconv.Itoa(int(c)) + ")"
}

// DefaultMessage returns Kafka's default message for the code ("" for NONE and unknown codes).
func (c ErrorCode) DefaultMessage() string { return errorCodeMessages[c] }

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
