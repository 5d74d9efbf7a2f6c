package shard

import (
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
			if got := javaStringHash(tt.key); got != tt.hash {
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
	if got, want := javaStringHash("😀"), int32(0xD83D*31+0xDE00); got != want {
		t.Errorf("surrogate hash = %d, want %d", got, want)
	}
	// Utils.abs(Integer.MIN_VALUE) is 0: "polygenelubricants" hashes to MIN_VALUE in Java.
	if got := javaStringHash("polygenelubricants"); got != -2147483648 {
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
