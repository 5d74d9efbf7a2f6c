package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var goldenTopic = TopicID{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}

// goldenRecords are byte vectors derived by hand from the layout of Kafka's records (not produced
// by the encoder under test). Each derivation is written next to its bytes.
var goldenRecords = []struct {
	name string
	rec  Record
	hex  string
}{
	{
		// ShareUpdate for g1 / 000102…0f / 3; SnapshotEpoch 1, LeaderEpoch 2, StartOffset 100,
		// one batch [100, 109] acknowledged(2) count 1, DeliveryCompleteCount -1 (default: not written).
		//   key   = type 0x0001 | group len 0x0002 "g1" | 16 uuid bytes | partition 0x00000003 = 26 bytes,
		//           length zigzag(26) = 52 = 0x34
		//   value = version 0x0000 | 00000001 | 00000002 | 0000000000000064 |
		//           compact array len 1+1 = 0x02 | 0000000000000064 000000000000006d 02 0001 00(batch tags) |
		//           00 (no tagged fields) = 40 bytes, length zigzag(40) = 80 = 0x50
		name: "update",
		rec: Record{Type: TypeUpdate, Key: Key{"g1", goldenTopic, 3}, Update: &UpdateValue{
			SnapshotEpoch: 1, LeaderEpoch: 2, StartOffset: 100, DeliveryCompleteCount: -1,
			StateBatches: []StateBatch{{100, 109, 2, 1}},
		}},
		hex: `34 0001 0002 6731 000102030405060708090a0b0c0d0e0f 00000003
		      50 0000 00000001 00000002 0000000000000064
		      02 0000000000000064 000000000000006d 02 0001 00
		      00`,
	},
	{
		// ShareSnapshot for the same key; SnapshotEpoch 5, StateEpoch 3, LeaderEpoch 4, StartOffset 0,
		// CreateTimestamp 1000 (0x3e8), WriteTimestamp 2000 (0x7d0), no batches, DeliveryCompleteCount 7.
		//   key   = type 0x0000 | same key message = 26 bytes → 0x34
		//   value = 0000 | 00000005 | 00000003 | 00000004 | 0000000000000000 | 00000000000003e8 |
		//           00000000000007d0 | empty compact array 0x01 |
		//           tagged: count 01, tag 00, size 04, 00000007 = 46 bytes → zigzag 92 = 0x5c
		name: "snapshot with delivery complete count",
		rec: Record{Type: TypeSnapshot, Key: Key{"g1", goldenTopic, 3}, Snapshot: &SnapshotValue{
			SnapshotEpoch: 5, StateEpoch: 3, LeaderEpoch: 4, StartOffset: 0,
			CreateTimestamp: 1000, WriteTimestamp: 2000, DeliveryCompleteCount: 7,
		}},
		hex: `34 0000 0002 6731 000102030405060708090a0b0c0d0e0f 00000003
		      5c 0000 00000005 00000003 00000004 0000000000000000 00000000000003e8 00000000000007d0
		      01
		      01 00 04 00000007`,
	},
	{
		// Tombstone: the snapshot key with a null value, value length zigzag(-1) = 1 = 0x01.
		name: "tombstone",
		rec:  Record{Type: TypeSnapshot, Key: Key{"g1", goldenTopic, 3}, Tombstone: true},
		hex:  `34 0000 0002 6731 000102030405060708090a0b0c0d0e0f 00000003 01`,
	},
	{
		// A 64-byte group makes the key 2+2+64+16+4 = 88 bytes: zigzag 176 = 0xb0 0x01 as a varint
		// (low seven bits 0x30 with the continuation bit, then 1). Update with LeaderEpoch -1 and
		// StartOffset -1 ("keep"), no batches, DeliveryCompleteCount 0 (≠ -1, so written):
		//   value = 0000 | 00000000 | ffffffff | ffffffffffffffff | 01 | 01 00 04 00000000 = 26 → 0x34
		name: "long group, keep sentinels",
		rec: Record{Type: TypeUpdate, Key: Key{strings.Repeat("a", 64), TopicID{}, 0}, Update: &UpdateValue{
			SnapshotEpoch: 0, LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: 0,
		}},
		hex: `b001 0001 0040 ` + strings.Repeat("61", 64) + ` 00000000000000000000000000000000 00000000
		      34 0000 00000000 ffffffff ffffffffffffffff 01 01 00 04 00000000`,
	},
}

func TestRecordGoldenVectors(t *testing.T) {
	for _, g := range goldenRecords {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(t, g.hex)
			got, err := Encode(g.rec)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encode:\n got %x\nwant %x", got, want)
			}
			dec, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, g.rec) {
				t.Fatalf("decode:\n got %+v\nwant %+v", dec, g.rec)
			}
		})
	}
}

func TestDecodeRecordErrors(t *testing.T) {
	key := "0002 6731 000102030405060708090a0b0c0d0e0f 00000003"
	tests := []struct {
		name string
		hex  string
		want error
		// wantRec is checked when the decoding succeeds.
		wantRec *Record
	}{
		{name: "unknown record type is skippable", hex: "34 0002 " + key + " 01", want: ErrUnknownRecordType},
		{name: "negative record type", hex: "34 ffff " + key + " 01", want: ErrUnknownRecordType},
		{name: "unknown value version", hex: "34 0001 " + key + " 08 0001 0000", want: ErrUnknownValueVersion},
		{name: "update tombstone", hex: "34 0001 " + key + " 01", want: ErrMalformedRecord},
		{name: "empty", hex: "", want: ErrMalformedRecord},
		{name: "key shorter than its length", hex: "34 0001 0002", want: ErrMalformedRecord},
		{name: "null group", hex: "30 0001 ffff 000102030405060708090a0b0c0d0e0f 00000003 01", want: ErrMalformedRecord},
		{name: "trailing bytes in key", hex: "32 0000 " + key + " ff 01", want: ErrMalformedRecord},
		{name: "trailing bytes after record", hex: "34 0000 " + key + " 01 00", want: ErrMalformedRecord},
		{name: "value length below -1", hex: "34 0000 " + key + " 03", want: ErrMalformedRecord},
		{name: "null state batches", hex: "34 0001 " + key + " 28 0000 00000001 00000002 0000000000000064 00 00", want: ErrMalformedRecord},
		{name: "batch count beyond the bytes", hex: "34 0001 " + key + " 28 0000 00000001 00000002 0000000000000064 05 00", want: ErrMalformedRecord},
		{name: "delivery complete count of the wrong size", hex: "34 0001 " + key + " 30 0000 00000001 00000002 0000000000000064 01 01 00 02 0007", want: ErrMalformedRecord},
		{name: "varint longer than 5 bytes", hex: "ffffffffff01", want: ErrMalformedRecord},
		{
			name: "unknown tagged fields are skipped",
			// value: 0000 | 00000001 | 00000002 | 0000000000000064 | 01 | tagged: 02 fields:
			// tag 05 size 01 aa; tag 00 size 04 00000009 = 2+4+4+8+1+1+3+6 = 29 → zigzag 58 = 0x3a
			hex: "34 0001 " + key + " 3a 0000 00000001 00000002 0000000000000064 01 02 05 01 aa 00 04 00000009",
			wantRec: &Record{Type: TypeUpdate, Key: Key{"g1", goldenTopic, 3}, Update: &UpdateValue{
				SnapshotEpoch: 1, LeaderEpoch: 2, StartOffset: 100, DeliveryCompleteCount: 9,
			}},
		},
		{
			name: "tagged fields inside a batch are skipped",
			// batch: first 1, last 2, state 0, count 0, tagged: 01 field, tag 07 size 02 bbbb = 24 bytes;
			// value = 2+4+4+8+1+24+1 = 44 → zigzag 88 = 0x58
			hex: "34 0001 " + key + " 58 0000 00000001 00000002 0000000000000064 02 0000000000000001 0000000000000002 00 0000 01 07 02 bbbb 00",
			wantRec: &Record{Type: TypeUpdate, Key: Key{"g1", goldenTopic, 3}, Update: &UpdateValue{
				SnapshotEpoch: 1, LeaderEpoch: 2, StartOffset: 100, DeliveryCompleteCount: -1,
				StateBatches: []StateBatch{{1, 2, 0, 0}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Decode(unhex(t, tt.hex))
			if tt.wantRec != nil {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(rec, *tt.wantRec) {
					t.Fatalf("got %+v, want %+v", rec, *tt.wantRec)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestEncodeRecordRejects(t *testing.T) {
	tests := []Record{
		{Type: TypeUpdate, Key: Key{GroupID: "g"}, Tombstone: true},
		{Type: TypeSnapshot, Key: Key{GroupID: "g"}},
		{Type: 7, Key: Key{GroupID: "g"}, Update: &UpdateValue{}},
		{Type: TypeSnapshot, Key: Key{GroupID: strings.Repeat("x", 1<<15)}, Snapshot: &SnapshotValue{}},
	}
	for i, r := range tests {
		if _, err := Encode(r); err == nil {
			t.Errorf("case %d: Encode(%+v) succeeded", i, r)
		}
	}
}

func TestSnapshotRecordSize(t *testing.T) {
	mk, _ := EncodeKey(Key{"group", goldenTopic, 1})
	for _, n := range []int{0, 1, 126, 127, 5000} {
		for _, dcc := range []int32{-1, 3} {
			v := SnapshotValue{StateBatches: make([]StateBatch, n), DeliveryCompleteCount: dcc}
			if got, want := SnapshotSize(mk, n, dcc), len(AppendSnapshot(nil, mk, &v)); got != want {
				t.Errorf("n=%d dcc=%d: size %d, encoded %d", n, dcc, got, want)
			}
			if bound, size := SnapshotSizeBound(mk, n, dcc), SnapshotSize(mk, n, dcc); bound < size {
				t.Errorf("n=%d dcc=%d: bound %d below the size %d", n, dcc, bound, size)
			}
		}
	}
}

// FuzzDecodeRecord checks that decoding never panics and that whatever decodes re-encodes to bytes
// that decode to the same record.
func FuzzDecodeRecord(f *testing.F) {
	for _, g := range goldenRecords {
		f.Add(unhex(f, g.hex))
	}
	f.Add([]byte{})
	f.Add([]byte{0x34, 0x00, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The fast decoder takes only records the full decoder reads the same way.
		decodeBoth(t, b)
		rec, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := Encode(rec)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", rec, err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("decoding the re-encoded record: %v", err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", again, rec)
		}
		// The allocation-free decoder used by replay agrees with Decode.
		var d Decoded
		if _, err := DecodeInto(b, &d, nil); err != nil {
			t.Fatalf("DecodeInto failed where Decode succeeded: %v", err)
		}
	})
}
