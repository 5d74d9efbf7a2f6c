package record

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// decodeBoth decodes b with decodeFast and decodeSlow, each into fresh state, and fails if
// decodeFast succeeds where decodeSlow does not or disagrees with it. It reports whether
// decodeFast took the record.
func decodeBoth(t testing.TB, b []byte) bool {
	t.Helper()
	var fast, slow Decoded
	fb, ok := decodeFast(b, &fast, nil)
	sb, err := decodeSlow(b, &slow, nil)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("decodeFast took %x, which decodeSlow rejects: %v", b, err)
	}
	if !sameDecoded(&fast, &slow) || !reflect.DeepEqual(fb, sb) {
		t.Fatalf("decodeFast(%x) = %+v %v, decodeSlow = %+v %v", b, fast, fb, slow, sb)
	}
	return true
}

// sameDecoded compares the parts of two decoded records that their type makes meaningful.
func sameDecoded(a, b *Decoded) bool {
	if a.Type != b.Type || string(a.Key) != string(b.Key) || a.Tombstone != b.Tombstone {
		return false
	}
	switch {
	case a.Tombstone:
		return true
	case a.Type == TypeSnapshot:
		return reflect.DeepEqual(a.Snapshot, b.Snapshot)
	default:
		return reflect.DeepEqual(a.Update, b.Update)
	}
}

func mustEncode(t testing.TB, r Record) []byte {
	t.Helper()
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func manyBatches(n int) []StateBatch {
	out := make([]StateBatch, n)
	for i := range out {
		out[i] = StateBatch{FirstOffset: int64(i) * 10, LastOffset: int64(i)*10 + 9, DeliveryState: int8(i % 3), DeliveryCount: int16(i % 5)}
	}
	return out
}

// TestDecodeFastShapes checks which records the fast decoder takes (it must take what replay
// meets) and that it then agrees with the full decoder; the others fall back to decodeSlow.
func TestDecodeFastShapes(t *testing.T) {
	k := Key{GroupID: "group-1", TopicID: goldenTopic, Partition: 7}
	update := func(n int, dcc int32) Record {
		return Record{Type: TypeUpdate, Key: k, Update: &UpdateValue{SnapshotEpoch: 3, LeaderEpoch: 4, StartOffset: 55, StateBatches: manyBatches(n), DeliveryCompleteCount: dcc}}
	}
	snapshot := func(key Key, n int, dcc int32) Record {
		return Record{Type: TypeSnapshot, Key: key, Snapshot: &SnapshotValue{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4,
			CreateTimestamp: 5, WriteTimestamp: 6, StateBatches: manyBatches(n), DeliveryCompleteCount: dcc}}
	}
	tests := []struct {
		name     string
		b        []byte
		wantFast bool
	}{
		{"update, two batches, delivery complete count", mustEncode(t, update(2, 20)), true},
		{"update, no batches, no delivery complete count", mustEncode(t, update(0, -1)), true},
		{"update, 100 batches (two-byte value length)", mustEncode(t, update(100, 0)), true},
		{"snapshot, 50 batches", mustEncode(t, snapshot(k, 50, 9)), true},
		{"snapshot, no batches", mustEncode(t, snapshot(k, 0, -1)), true},
		{"snapshot, 126 batches (one-byte count)", mustEncode(t, snapshot(k, 126, 1)), true},
		{"snapshot, 127 batches (two-byte count)", mustEncode(t, snapshot(k, 127, 1)), true},
		{"snapshot, long group (two-byte key length)", mustEncode(t, snapshot(Key{GroupID: strings.Repeat("g", 200), TopicID: goldenTopic}, 3, 1)), true},
		{"snapshot, empty group", mustEncode(t, snapshot(Key{TopicID: goldenTopic}, 1, 1)), true},
		{"tombstone", mustEncode(t, Record{Type: TypeSnapshot, Key: k, Tombstone: true}), true},
		{"golden update", unhex(t, goldenRecords[0].hex), true},
		{"golden long group", unhex(t, goldenRecords[3].hex), true},
		// Rare shapes: decodeSlow decodes them.
		{"snapshot, 1000 batches (three-byte value length)", mustEncode(t, snapshot(k, 1000, 1)), false},
		{"tagged fields inside a batch", unhex(t, "34 0001 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 58 0000 00000001 00000002 0000000000000064 02 0000000000000001 0000000000000002 00 0000 01 07 02 bbbb 00"), false},
		{"unknown tagged field", unhex(t, "34 0001 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 3a 0000 00000001 00000002 0000000000000064 01 02 05 01 aa 00 04 00000009"), false},
		// Malformed or unknown: decodeSlow reports them.
		{"unknown type", unhex(t, "34 0002 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 01"), false},
		{"unknown value version", unhex(t, "34 0001 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 08 0001 0000"), false},
		{"update tombstone", unhex(t, "34 0001 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 01"), false},
		{"tombstone with trailing byte", unhex(t, "34 0000 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 01 00"), false},
		{"null group", unhex(t, "30 0001 ffff 000102030405060708090a0b0c0d0e0f 00000003 01"), false},
		{"group longer than the key", unhex(t, "34 0001 0003 6731 000102030405060708090a0b0c0d0e0f 00000003 01"), false},
		{"delivery complete count of the wrong size", unhex(t, "34 0001 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 30 0000 00000001 00000002 0000000000000064 01 01 00 02 0007"), false},
		{"null state batches", unhex(t, "34 0001 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 28 0000 00000001 00000002 0000000000000064 00 00"), false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeBoth(t, tt.b); got != tt.wantFast {
				t.Fatalf("decodeFast took the record: %v, want %v", got, tt.wantFast)
			}
			// Whichever decoder runs, DecodeInto answers as decodeSlow does.
			var viaInto, slow Decoded
			ib, ierr := DecodeInto(tt.b, &viaInto, nil)
			sb, serr := decodeSlow(tt.b, &slow, nil)
			if (ierr == nil) != (serr == nil) || ierr != nil && ierr.Error() != serr.Error() {
				t.Fatalf("DecodeInto error %v, decodeSlow error %v", ierr, serr)
			}
			if viaInto.Type != slow.Type || serr == nil && (!sameDecoded(&viaInto, &slow) || !reflect.DeepEqual(ib, sb)) {
				t.Fatalf("DecodeInto = %+v, decodeSlow = %+v", viaInto, slow)
			}
		})
	}
}

// TestDecodeFastMutations corrupts valid records at random (byte flips, truncation, extension)
// and checks that the fast decoder never takes a record the full decoder rejects or reads
// differently.
func TestDecodeFastMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	k := Key{GroupID: "g", TopicID: goldenTopic, Partition: 1}
	var seeds [][]byte
	for _, n := range []int{0, 1, 2, 7} {
		for _, dcc := range []int32{-1, 0, 12} {
			seeds = append(seeds,
				mustEncode(t, Record{Type: TypeUpdate, Key: k, Update: &UpdateValue{LeaderEpoch: 1, StartOffset: 3, StateBatches: manyBatches(n), DeliveryCompleteCount: dcc}}),
				mustEncode(t, Record{Type: TypeSnapshot, Key: k, Snapshot: &SnapshotValue{StateEpoch: 1, StartOffset: 3, StateBatches: manyBatches(n), DeliveryCompleteCount: dcc}}))
		}
	}
	seeds = append(seeds, mustEncode(t, Record{Type: TypeSnapshot, Key: k, Tombstone: true}))
	took := 0
	for i := 0; i < 50000; i++ {
		b := append([]byte(nil), seeds[r.IntN(len(seeds))]...)
		switch r.IntN(4) {
		case 0:
			b = b[:r.IntN(len(b)+1)]
		case 1:
			b = append(b, byte(r.IntN(256)))
		default:
			for n := 1 + r.IntN(3); n > 0; n-- {
				b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
			}
		}
		if decodeBoth(t, b) {
			took++
		}
	}
	if took == 0 {
		t.Fatal("no mutated record took the fast path; the test checks nothing")
	}
}
