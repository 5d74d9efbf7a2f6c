package kafkaerr

import "strconv"

// Code is a Kafka error code; the numbers equal Kafka's so they travel unchanged.
type Code int16

// The Kafka error codes coordinatord uses, with their Kafka names.
const (
	// None is NONE: no error.
	None Code = 0
	// UnknownServerError is UNKNOWN_SERVER_ERROR: an unexpected failure on the server.
	UnknownServerError Code = -1
	// UnknownTopicOrPartition is UNKNOWN_TOPIC_OR_PARTITION (defined for Kafka compatibility).
	UnknownTopicOrPartition Code = 3
	// RequestTimedOut is REQUEST_TIMED_OUT (defined for Kafka compatibility).
	RequestTimedOut Code = 7
	// CoordinatorLoadInProgress is COORDINATOR_LOAD_IN_PROGRESS: the state partition is loading.
	CoordinatorLoadInProgress Code = 14
	// CoordinatorNotAvailable is COORDINATOR_NOT_AVAILABLE: the state partition cannot serve now.
	CoordinatorNotAvailable Code = 15
	// NotCoordinator is NOT_COORDINATOR: this node does not own the key's state partition.
	NotCoordinator Code = 16
	// GroupAuthorizationFailed is GROUP_AUTHORIZATION_FAILED.
	GroupAuthorizationFailed Code = 30
	// ClusterAuthorizationFailed is CLUSTER_AUTHORIZATION_FAILED.
	ClusterAuthorizationFailed Code = 31
	// InvalidConfig is INVALID_CONFIG: a configuration name, value or operation is not allowed.
	InvalidConfig Code = 40
	// InvalidRequest is INVALID_REQUEST: the request is malformed for this key or resource.
	InvalidRequest Code = 42
	// GroupIDNotFound is GROUP_ID_NOT_FOUND (defined for Kafka compatibility).
	GroupIDNotFound Code = 69
	// FencedLeaderEpoch is FENCED_LEADER_EPOCH: the request's leader epoch is older than the stored one.
	FencedLeaderEpoch Code = 74
	// FencedStateEpoch is FENCED_STATE_EPOCH: the request's state epoch is older than the stored one.
	FencedStateEpoch Code = 124
)

var names = map[Code]string{
	None:                       "NONE",
	UnknownServerError:         "UNKNOWN_SERVER_ERROR",
	UnknownTopicOrPartition:    "UNKNOWN_TOPIC_OR_PARTITION",
	RequestTimedOut:            "REQUEST_TIMED_OUT",
	CoordinatorLoadInProgress:  "COORDINATOR_LOAD_IN_PROGRESS",
	CoordinatorNotAvailable:    "COORDINATOR_NOT_AVAILABLE",
	NotCoordinator:             "NOT_COORDINATOR",
	GroupAuthorizationFailed:   "GROUP_AUTHORIZATION_FAILED",
	ClusterAuthorizationFailed: "CLUSTER_AUTHORIZATION_FAILED",
	InvalidConfig:              "INVALID_CONFIG",
	InvalidRequest:             "INVALID_REQUEST",
	GroupIDNotFound:            "GROUP_ID_NOT_FOUND",
	FencedLeaderEpoch:          "FENCED_LEADER_EPOCH",
	FencedStateEpoch:           "FENCED_STATE_EPOCH",
}

// Kafka's default messages (Errors.java), used when an error carries no message of its own.
var messages = map[Code]string{
	UnknownServerError:         "The server experienced an unexpected error when processing the request.",
	UnknownTopicOrPartition:    "This server does not host this topic-partition.",
	RequestTimedOut:            "The request timed out.",
	CoordinatorLoadInProgress:  "The coordinator is loading and hence can't process requests.",
	CoordinatorNotAvailable:    "The coordinator is not available.",
	NotCoordinator:             "This is not the correct coordinator.",
	GroupAuthorizationFailed:   "Group authorization failed.",
	ClusterAuthorizationFailed: "Cluster authorization failed.",
	InvalidConfig:              "Configuration is invalid.",
	InvalidRequest:             "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
	GroupIDNotFound:            "The group id does not exist.",
	FencedLeaderEpoch:          "The leader epoch in the request is older than the epoch on the broker.",
	FencedStateEpoch:           "The coordinator rejected the request because the state epoch did not match.",
}

// Known reports whether c is one of the codes this package defines.
func (c Code) Known() bool {
	_, ok := names[c]
	return ok
}

// String returns Kafka's name of the code (e.g. "FENCED_STATE_EPOCH"), or "ERROR_CODE(n)" for a
// code this package does not know.
func (c Code) String() string {
	if n, ok := names[c]; ok {
		return n
	}
	return "ERROR_CODE(" + strconv.Itoa(int(c)) + ")"
}

// DefaultMessage returns Kafka's default message for the code ("" for None and unknown codes).
func (c Code) DefaultMessage() string { return messages[c] }
