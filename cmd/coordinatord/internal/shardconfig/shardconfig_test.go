package shardconfig

import (
	"reflect"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

func broker(t *testing.T, overrides ...string) groupcfg.Broker {
	t.Helper()
	st, err := groupcfg.LoadStatic(groupcfg.Sources{Overrides: overrides})
	if err != nil {
		t.Fatal(err)
	}
	return st.Broker()
}

// TestFromBroker: each setting reaches its field.
func TestFromBroker(t *testing.T) {
	b := broker(t,
		"share.coordinator.state.topic.segment.bytes=2097152",
		"share.coordinator.load.buffer.size=65536",
		"share.coordinator.append.linger.ms=7",
		"share.coordinator.write.timeout.ms=1234",
		"share.coordinator.state.topic.prune.interval.ms=4321",
		"share.coordinator.cold.partition.snapshot.interval.ms=9876",
	)
	got := FromBroker(b, "/data", 3)
	want := Partition{
		Shard: shard.Options{
			Partition:            3,
			AppendLingerMs:       7,
			WriteTimeout:         1234 * time.Millisecond,
			PruneInterval:        4321 * time.Millisecond,
			ColdSnapshotInterval: 9876 * time.Millisecond,
		},
		LogDir: "/data/__share_group_state-3",
		Log:    statelog.Options{SegmentBytes: 2097152, ReadBufferBytes: 65536, Name: "3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FromBroker = %+v\nwant %+v", got, want)
	}
}

// TestEveryFieldIsDecided: every field of shard.Options, and of the log's statelog.Options, is
// either set by FromBroker or listed here as the caller's, so that a field added to the options
// is mapped from its setting or left to the callers deliberately.
func TestEveryFieldIsDecided(t *testing.T) {
	callers := map[string]bool{
		// Shared between the shards of one process.
		"Shard.Metrics": true, "Log.Metrics": true, "Log.SyncGroup": true, "Log.Journal": true,
		// No setting reaches them: the server leaves them at their defaults.
		"Shard.MaxBatchRecords": true, "Shard.MaxBatchBytes": true, "Shard.Now": true, "Shard.QueueSize": true,
		"Shard.RetryBackoff": true, "Shard.MaxRetryBackoff": true,
		"Log.MaxRecordBytes": true, "Log.FS": true,
		// Set by the log's owner: the local log after a failed append, or a cluster's replica.
		"Log.TruncateAfter": true, "Log.DeferSync": true, "Log.OwnerFiles": true,
	}
	o := FromBroker(broker(t), "/data", 3) // every mapped field is non-zero with the defaults
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			name, f := prefix+v.Type().Field(i).Name, v.Field(i)
			if f.Type() == reflect.TypeOf(statelog.Options{}) || f.Type() == reflect.TypeOf(shard.Options{}) {
				walk(name+".", f)
				continue
			}
			switch set := !f.IsZero(); {
			case set && callers[name]:
				t.Errorf("%s is listed as the caller's, but FromBroker sets it: remove it from the list", name)
			case !set && !callers[name]:
				t.Errorf("%s is neither set by FromBroker nor listed as the caller's: map it from its setting, or list it", name)
			}
		}
	}
	walk("", reflect.ValueOf(o))
}
