package groupcfg

// The Provider method returns a group's effective value: its stored override clamped to the
// broker bounds in force, or, without an override, the broker default in force (the key's
// synonym) or the built-in default. It is lock-free and allocation-free, safe for concurrent use,
// and sees a change as soon as IncrementalAlterConfigs has made it durable.

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
