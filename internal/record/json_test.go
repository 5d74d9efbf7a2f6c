package record

import (
	"encoding/json"
	"testing"
)

// TestValueJSON pins the JSON form of the values (what dump-log prints): field names and order,
// and an empty batch list shown as [] whether or not it is nil.
func TestValueJSON(t *testing.T) {
	want := map[string]string{
		"snapshot without batches":                 `{"snapshot_epoch":1,"state_epoch":2,"leader_epoch":3,"start_offset":4,"create_timestamp":5,"write_timestamp":6,"delivery_complete_count":-1,"state_batches":[]}`,
		"update with a batch":                      `{"snapshot_epoch":1,"leader_epoch":-1,"start_offset":-1,"delivery_complete_count":7,"state_batches":[{"first_offset":10,"last_offset":20,"delivery_state":2,"delivery_count":3}]}`,
		"update with an empty, non-nil batch list": `{"snapshot_epoch":0,"leader_epoch":0,"start_offset":0,"delivery_complete_count":0,"state_batches":[]}`,
		"tombstone": `null`,
	}
	records := map[string]Record{
		"snapshot without batches": {Type: TypeSnapshot, Snapshot: &SnapshotValue{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4,
			CreateTimestamp: 5, WriteTimestamp: 6, DeliveryCompleteCount: -1}},
		"update with a batch": {Type: TypeUpdate, Update: &UpdateValue{SnapshotEpoch: 1, LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: 7,
			StateBatches: []StateBatch{{10, 20, 2, 3}}}},
		"update with an empty, non-nil batch list": {Type: TypeUpdate, Update: &UpdateValue{StateBatches: []StateBatch{}}},
		"tombstone": {Type: TypeSnapshot, Tombstone: true},
	}
	for name, r := range records {
		b, err := json.Marshal(r.Value())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(b) != want[name] {
			t.Errorf("%s:\n got  %s\n want %s", name, b, want[name])
		}
	}
}
