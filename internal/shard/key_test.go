package shard

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/record"
)

func mustTopic(t testing.TB, s string) record.TopicID {
	t.Helper()
	id, err := record.ParseTopicID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Five routing vectors computed with Java's own String.hashCode.
func TestPartitionForSpecVectors(t *testing.T) {
	tests := []struct {
		key         string
		hash        int32
		mod50, mod3 int
	}{
		{"group1:AAAAAAAAAAAAAAAAAAAAAA:0", 1506701694, 44, 0},
		{"group1:AAAAAAAAAAAAAAAAAAAAAQ:3", 1506717073, 23, 1},
		{"my-share-group:P6hfZFcXRWKz_CyWP2avpg:7", -255740016, 16, 0},
		{"grp:with:colons:ASNFZ4mrze8BI0VniavN7w:12", -895938745, 45, 1},
		{"ünïcödé:_____________________w:1", -500682540, 40, 0},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := javaStringHash(0, tt.key); got != tt.hash {
				t.Errorf("hash = %d, want %d", got, tt.hash)
			}
			if got := PartitionFor(tt.key, 50); got != tt.mod50 {
				t.Errorf("PartitionFor(50) = %d, want %d", got, tt.mod50)
			}
			if got := PartitionFor(tt.key, 3); got != tt.mod3 {
				t.Errorf("PartitionFor(3) = %d, want %d", got, tt.mod3)
			}
			k, err := ParseCoordinatorKey(tt.key)
			if err != nil {
				t.Fatalf("ParseCoordinatorKey: %v", err)
			}
			if got := k.CoordinatorKey(); got != tt.key {
				t.Errorf("round trip = %q, want %q", got, tt.key)
			}
		})
	}
}

func TestPartitionForEdgeCases(t *testing.T) {
	// A supplementary character hashes as its two UTF-16 surrogates: "😀" = U+D83D U+DE00.
	if got, want := javaStringHash(0, "😀"), int32(0xD83D*31+0xDE00); got != want {
		t.Errorf("surrogate hash = %d, want %d", got, want)
	}
	// Utils.abs(Integer.MIN_VALUE) is 0: "polygenelubricants" hashes to MIN_VALUE in Java.
	if got := javaStringHash(0, "polygenelubricants"); got != -2147483648 {
		t.Fatalf("hash = %d, want MIN_VALUE", got)
	}
	if got := PartitionFor("polygenelubricants", 7); got != 0 {
		t.Errorf("PartitionFor(MIN_VALUE hash) = %d, want 0", got)
	}
	if got := PartitionFor("anything", 0); got != 0 {
		t.Errorf("PartitionFor with 0 partitions = %d, want 0", got)
	}
}

func TestParseCoordinatorKey(t *testing.T) {
	id := mustTopic(t, "P6hfZFcXRWKz_CyWP2avpg")
	tests := []struct {
		in      string
		want    Key
		wantErr string
	}{
		{in: "g:P6hfZFcXRWKz_CyWP2avpg:7", want: Key{"g", id, 7}},
		{in: "a:b:c:P6hfZFcXRWKz_CyWP2avpg:0", want: Key{"a:b:c", id, 0}},
		{in: "g:P6hfZFcXRWKz_CyWP2avpg:-3", want: Key{"g", id, -3}},
		{in: "g:P6hfZFcXRWKz_CyWP2avpg:+3", want: Key{"g", id, 3}},
		{in: "g:P6hfZFcXRWKz_CyWP2avpg:7::", want: Key{"g", id, 7}}, // Java's split drops trailing empties
		{in: "::P6hfZFcXRWKz_CyWP2avpg:1", want: Key{":", id, 1}},   // ":" is not blank for trim()
		{in: "", wantErr: "empty"},
		{in: "g:P6hfZFcXRWKz_CyWP2avpg", wantErr: "expected groupId:topicId:partition"},
		{in: " \t:P6hfZFcXRWKz_CyWP2avpg:1", wantErr: "blank"},
		{in: ":P6hfZFcXRWKz_CyWP2avpg:1", wantErr: "blank"},
		{in: "g:not-a-topic:1", wantErr: "\"not-a-topic\" is not a valid topic id"},
		{in: "g:P6hfZFcXRWKz_CyWP2avpg:x", wantErr: "invalid partition"},
		{in: "g:P6hfZFcXRWKz_CyWP2avpg:2147483648", wantErr: "invalid partition"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCoordinatorKey(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// PartitionOf routes every key as PartitionFor routes its coordinator key: groups of any
// characters (outside the Basic Multilingual Plane, invalid UTF-8, ':'), any topic id, any
// partition, any partition count.
func TestPartitionOfIsPartitionForOfTheCoordinatorKey(t *testing.T) {
	groups := []string{"", "g", "share-group", "a:b:", "grüppe", "😀 group", "\xff\xfe", strings.Repeat("x", 300)}
	parts := []int32{0, 1, 9, 10, 4095, -1, math.MaxInt32, math.MinInt32}
	counts := []int{0, 1, 3, 50, 1000, math.MaxInt32}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(k Key, n int) {
		t.Helper()
		if got, want := k.PartitionOf(n), PartitionFor(k.CoordinatorKey(), n); got != want {
			t.Fatalf("%q.PartitionOf(%d) = %d, PartitionFor of its coordinator key = %d", k.CoordinatorKey(), n, got, want)
		}
	}
	for _, g := range groups {
		for _, p := range parts {
			for _, n := range counts {
				var id record.TopicID
				for i := range id {
					id[i] = byte(rng.Uint32())
				}
				check(Key{GroupID: g, TopicID: id, Partition: p}, n)
			}
		}
	}
	for range 10000 {
		g := make([]rune, rng.IntN(20))
		for i := range g {
			g[i] = rune(rng.IntN(0x11000))
		}
		var id record.TopicID
		for i := range id {
			id[i] = byte(rng.Uint32())
		}
		check(Key{GroupID: string(g), TopicID: id, Partition: int32(rng.Uint32())}, 1+rng.IntN(100))
	}
}

func BenchmarkRoute(b *testing.B) {
	k := Key{GroupID: "bench-group", TopicID: record.TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partition: 117}
	b.Run("PartitionFor(CoordinatorKey)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = PartitionFor(k.CoordinatorKey(), 50)
		}
	})
	b.Run("PartitionOf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = k.PartitionOf(50)
		}
	})
}
