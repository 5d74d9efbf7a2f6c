package groupcfg

// The Provider methods return a group's effective values: its stored override clamped to the
// broker bounds in force, or, without an override, the broker default in force (the key's
// synonym) or the built-in default. They are lock-free and allocation-free, safe for concurrent
// use, and see a change as soon as IncrementalAlterConfigs has made it durable.

func (m *Manager) value(groupID string, p int) value {
	return m.view.Load().values(groupID).vals[p]
}

// SnapshotUpdateRecordsPerSnapshot returns the number of update records to write between
// snapshot records for groupID's share partitions: share.snapshot.update.records.per.snapshot
// capped by share.coordinator.snapshot.update.records.per.snapshot in force, or that broker value
// when the group has no override. Always in [200, 1000].
func (m *Manager) SnapshotUpdateRecordsPerSnapshot(groupID string) int {
	return int(m.value(groupID, m.pos.snapshot).num)
}

// SessionTimeoutMs returns share.session.timeout.ms for groupID.
func (m *Manager) SessionTimeoutMs(groupID string) int {
	return int(m.value(groupID, m.pos.session).num)
}

// HeartbeatIntervalMs returns share.heartbeat.interval.ms for groupID.
func (m *Manager) HeartbeatIntervalMs(groupID string) int {
	return int(m.value(groupID, m.pos.heartbeat).num)
}

// RecordLockDurationMs returns share.record.lock.duration.ms for groupID.
func (m *Manager) RecordLockDurationMs(groupID string) int {
	return int(m.value(groupID, m.pos.lockDuration).num)
}

// DeliveryCountLimit returns share.delivery.count.limit for groupID.
func (m *Manager) DeliveryCountLimit(groupID string) int {
	return int(m.value(groupID, m.pos.deliveryCount).num)
}

// PartitionMaxRecordLocks returns share.partition.max.record.locks for groupID.
func (m *Manager) PartitionMaxRecordLocks(groupID string) int {
	return int(m.value(groupID, m.pos.recordLocks).num)
}

// RenewAcknowledgeEnabled returns share.renew.acknowledge.enable for groupID.
func (m *Manager) RenewAcknowledgeEnabled(groupID string) bool {
	return m.value(groupID, m.pos.renew).flag
}

// AutoOffsetReset returns share.auto.offset.reset for groupID: "earliest", "latest" or
// "by_duration:<ISO-8601 duration>" (as it was set).
func (m *Manager) AutoOffsetReset(groupID string) string {
	return m.value(groupID, m.pos.autoReset).text
}

// IsolationLevel returns share.isolation.level for groupID: "read_committed" or "read_uncommitted".
func (m *Manager) IsolationLevel(groupID string) string {
	return m.value(groupID, m.pos.isolation).text
}

// AssignmentIntervalMs returns share.assignment.interval.ms for groupID.
func (m *Manager) AssignmentIntervalMs(groupID string) int {
	return int(m.value(groupID, m.pos.assignInterval).num)
}

// AssignorOffloadEnabled returns share.assignor.offload.enable for groupID.
func (m *Manager) AssignorOffloadEnabled(groupID string) bool {
	return m.value(groupID, m.pos.assignOffload).flag
}

// DeadLetterTopicName returns errors.deadletterqueue.topic.name for groupID ("" = no DLQ topic).
func (m *Manager) DeadLetterTopicName(groupID string) string {
	return m.value(groupID, m.pos.dlqName).text
}

// DeadLetterCopyRecordEnabled returns errors.deadletterqueue.copy.record.enable for groupID.
func (m *Manager) DeadLetterCopyRecordEnabled(groupID string) bool {
	return m.value(groupID, m.pos.dlqCopy).flag
}

// GroupValue returns the effective value of any group key for groupID as canonical text; ok is
// false when key is not a group key. It serves keys added to the table without a typed getter.
func (m *Manager) GroupValue(groupID, key string) (text string, ok bool) {
	p, ok := m.sch.groupPos[key]
	if !ok {
		return "", false
	}
	return m.value(groupID, p).text, true
}
