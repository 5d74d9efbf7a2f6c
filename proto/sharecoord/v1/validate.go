package sharecoordv1

import (
	"fmt"
	"unicode/utf8"
)

// MaxGroupIDBytes is the longest group id a state request may carry: Kafka encodes the group id
// of a state record key as an int16-length string, so longer ids could not be stored.
const MaxGroupIDBytes = 32767

// Validate checks the shape of the request (see validateShape). The validation interceptor calls
// it before the handler runs; a non-nil error becomes gRPC INVALID_ARGUMENT.
func (r *InitializeShareGroupStateRequest) Validate() error {
	return validateShape(r.GetGroupId(), r.GetTopics())
}

// Validate checks the shape of the request (see validateShape).
func (r *ReadShareGroupStateRequest) Validate() error {
	return validateShape(r.GetGroupId(), r.GetTopics())
}

// Validate checks the shape of the request (see validateShape).
func (r *WriteShareGroupStateRequest) Validate() error {
	return validateShape(r.GetGroupId(), r.GetTopics())
}

// Validate checks the shape of the request (see validateShape).
func (r *DeleteShareGroupStateRequest) Validate() error {
	return validateShape(r.GetGroupId(), r.GetTopics())
}

// Validate checks the shape of the request (see validateShape).
func (r *ReadShareGroupStateSummaryRequest) Validate() error {
	return validateShape(r.GetGroupId(), r.GetTopics())
}

// Validate checks that the request names at least one key. Each key is checked on its own and
// answered per key.
func (r *FindCoordinatorRequest) Validate() error {
	if len(r.GetKeys()) == 0 {
		return fmt.Errorf("keys must not be empty: name at least one coordinator key \"groupId:topicId:partition\"")
	}
	return nil
}

// PartitionCount returns how many partitions the request names across all topics.
func (r *InitializeShareGroupStateRequest) PartitionCount() int { return countPartitions(r.GetTopics()) }

// PartitionCount returns how many partitions the request names across all topics.
func (r *ReadShareGroupStateRequest) PartitionCount() int { return countPartitions(r.GetTopics()) }

// PartitionCount returns how many partitions the request names across all topics.
func (r *WriteShareGroupStateRequest) PartitionCount() int { return countPartitions(r.GetTopics()) }

// PartitionCount returns how many partitions the request names across all topics.
func (r *DeleteShareGroupStateRequest) PartitionCount() int { return countPartitions(r.GetTopics()) }

// PartitionCount returns how many partitions the request names across all topics.
func (r *ReadShareGroupStateSummaryRequest) PartitionCount() int {
	return countPartitions(r.GetTopics())
}

// stateTopic is what every state request's topic entry has in common.
type stateTopic[P statePartition] interface {
	GetTopicId() string
	GetPartitions() []P
}

// statePartition is what every state request's partition entry has in common.
type statePartition interface {
	GetPartition() int32
}

// validateShape rejects whole-request faults: an empty, over-long or non-UTF-8 group id, no
// topics, a topic without partitions, or the same (topic id, partition) twice. Field values
// (topic id syntax, negative partitions, epochs, offsets) are answered per partition instead.
func validateShape[T stateTopic[P], P statePartition](groupID string, topics []T) error {
	switch {
	case groupID == "":
		return fmt.Errorf("group_id must not be empty")
	case len(groupID) > MaxGroupIDBytes:
		return fmt.Errorf("group_id is %d bytes long; at most %d bytes are allowed", len(groupID), MaxGroupIDBytes)
	case !utf8.ValidString(groupID):
		return fmt.Errorf("group_id is not valid UTF-8")
	case len(topics) == 0:
		return fmt.Errorf("topics must not be empty: name at least one topic with at least one partition")
	}
	type key struct {
		topic     string
		partition int32
	}
	type position struct{ topic, partition int }
	seen := make(map[key]position, len(topics))
	for ti, t := range topics {
		parts := t.GetPartitions()
		if len(parts) == 0 {
			return fmt.Errorf("topics[%d] (topic_id %q) has no partitions: list at least one partition", ti, t.GetTopicId())
		}
		for pi, p := range parts {
			k := key{t.GetTopicId(), p.GetPartition()}
			if first, dup := seen[k]; dup {
				return fmt.Errorf("topic_id %q partition %d appears twice (topics[%d].partitions[%d] and topics[%d].partitions[%d]): name each partition once per request",
					k.topic, k.partition, first.topic, first.partition, ti, pi)
			}
			seen[k] = position{ti, pi}
		}
	}
	return nil
}

func countPartitions[T stateTopic[P], P statePartition](topics []T) int {
	n := 0
	for _, t := range topics {
		n += len(t.GetPartitions())
	}
	return n
}
