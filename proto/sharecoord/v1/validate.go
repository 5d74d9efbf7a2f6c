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

// Validate checks that the request names at least one key and that every key is valid UTF-8.
// Each key's syntax is checked on its own and answered per key.
func (r *FindCoordinatorRequest) Validate() error {
	if len(r.GetKeys()) == 0 {
		return fmt.Errorf("keys must not be empty: name at least one coordinator key \"groupId:topicId:partition\"")
	}
	for i, k := range r.GetKeys() {
		if !utf8.ValidString(k) {
			return notUTF8(fmt.Sprintf("keys[%d]", i))
		}
	}
	return nil
}

// Validate checks that every string of the request is valid UTF-8. Everything else (resource
// types, names, operations, values) is answered per resource.
func (r *IncrementalAlterConfigsRequest) Validate() error {
	for i, res := range r.GetResources() {
		if !utf8.ValidString(res.GetResourceName()) {
			return notUTF8(fmt.Sprintf("resources[%d].resource_name", i))
		}
		for j, c := range res.GetConfigs() {
			if !utf8.ValidString(c.GetName()) {
				return notUTF8(fmt.Sprintf("resources[%d].configs[%d].name", i, j))
			}
			if !utf8.ValidString(c.GetValue()) {
				return notUTF8(fmt.Sprintf("resources[%d].configs[%d].value", i, j))
			}
		}
	}
	return nil
}

// Validate checks that every string of the request is valid UTF-8. Everything else is answered
// per resource.
func (r *DescribeConfigsRequest) Validate() error {
	for i, res := range r.GetResources() {
		if !utf8.ValidString(res.GetResourceName()) {
			return notUTF8(fmt.Sprintf("resources[%d].resource_name", i))
		}
		for j, k := range res.GetConfigurationKeys() {
			if !utf8.ValidString(k) {
				return notUTF8(fmt.Sprintf("resources[%d].configuration_keys[%d]", i, j))
			}
		}
	}
	return nil
}

// notUTF8 is the error for a string field that is not valid UTF-8. Such a request only reaches
// validation through the server's lenient decoder (protobuf refuses it while decoding).
func notUTF8(field string) error {
	return fmt.Errorf("%s is not valid UTF-8: every string field must be UTF-8 encoded", field)
}

// PartitionCount returns how many partitions the request names across all topics.
func (r *InitializeShareGroupStateRequest) PartitionCount() int {
	return countPartitions(r.GetTopics())
}

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
// topics, a topic without partitions, a topic id that is not UTF-8, or the same (topic id,
// partition) twice. Field values (topic id syntax, negative partitions, epochs, offsets) are
// answered per partition instead.
func validateShape[T stateTopic[P], P statePartition](groupID string, topics []T) error {
	switch {
	case groupID == "":
		return fmt.Errorf("group_id must not be empty")
	case len(groupID) > MaxGroupIDBytes:
		return fmt.Errorf("group_id is %d bytes long; at most %d bytes are allowed", len(groupID), MaxGroupIDBytes)
	case !utf8.ValidString(groupID):
		return notUTF8("group_id")
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
		if !utf8.ValidString(t.GetTopicId()) {
			return notUTF8(fmt.Sprintf("topics[%d].topic_id", ti))
		}
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
