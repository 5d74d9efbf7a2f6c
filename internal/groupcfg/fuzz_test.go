package groupcfg

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// FuzzDecodeStore: any bytes, with or without change records after the snapshot, either decode,
// and then re-encode to an equal state, or give a *StoreError; never a panic.
func FuzzDecodeStore(f *testing.F) {
	good, err := encodeStore(&storeState{NumPartitions: 50, Generation: 2,
		Broker: map[string]string{keySnapshotCeiling: "800"},
		Groups: map[string]map[string]string{"g": {keyDeliveryCountLimit: "7"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	rec, err := encodeRecord(&storeRecord{Generation: 3, change: change{
		Groups: map[string]map[string]string{"g": {keyDeliveryCountLimit: "8"}, "h": nil}, Broker: map[string]string{}, BrokerSet: true}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(slices.Clone(good), rec...))
	f.Add(append(slices.Clone(good), rec[:len(rec)-3]...))
	f.Add([]byte(""))
	f.Add([]byte("coordinatord-config 1 2 00000000\n{}"))
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeStore("store", data)
		if err != nil {
			if _, ok := err.(*StoreError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		again, err := encodeStore(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, err := decodeStore("store", again)
		if err != nil || !reflect.DeepEqual(st, st2) {
			t.Fatalf("re-encoded state does not decode to itself: %v\n%+v\n%+v", err, st, st2)
		}
	})
}

// FuzzStaticOverride: any --override is accepted or refused with one-line problems; never a panic.
func FuzzStaticOverride(f *testing.F) {
	f.Add("share.coordinator.snapshot.update.records.per.snapshot=0")
	f.Add("group.share.heartbeat.interval.ms=99999")
	f.Add("x")
	f.Add("share.coordinator.write.timeout.ms= 12 \n")
	f.Fuzz(func(t *testing.T, override string) {
		for _, p := range staticProblems(Sources{Overrides: []string{override}}) {
			if p.Message == "" || strings.ContainsAny(p.String(), "\n\r") {
				t.Fatalf("problem is not one line: %q", p.String())
			}
		}
	})
}

// FuzzGroupAlter: any group change is applied or refused with INVALID_CONFIG/INVALID_REQUEST and
// a one-line message; an accepted value reads back as its effective value; never a panic.
func FuzzGroupAlter(f *testing.F) {
	fx := openFixture(f, f.TempDir(), staticOf(f))
	f.Add("g", keyDeliveryCountLimit, "7", uint8(OpSet))
	f.Add("g", keyAutoOffsetReset, "by_duration:P1DT1H", uint8(OpSet))
	f.Add("", keyIsolationLevel, "read_committed", uint8(OpDelete))
	f.Add("g", keyGroupSnapshotLimit, "1e3", uint8(OpAppend))
	f.Fuzz(func(t *testing.T, group, key, val string, op uint8) {
		res := fx.m.IncrementalAlterConfigs(context.Background(), []AlterResource{groupRes(group, AlterConfig{Name: key, Op: Operation(op), Value: &val})}, true)[0]
		switch res.ErrorCode {
		case kafkaerr.None:
		case kafkaerr.InvalidConfig, kafkaerr.InvalidRequest:
			if res.ErrorMessage == "" || strings.ContainsAny(res.ErrorMessage, "\n\r") {
				t.Fatalf("message is not one line: %q", res.ErrorMessage)
			}
		default:
			t.Fatalf("unexpected %s %q", res.ErrorCode, res.ErrorMessage)
		}
	})
}
