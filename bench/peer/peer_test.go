package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

func TestParseLeaderships(t *testing.T) {
	text := `# HELP sharecoord_raft_leader 1 if this node leads the state partition and serves it, else 0.
# TYPE sharecoord_raft_leader gauge
sharecoord_raft_leader{partition="0"} 1
sharecoord_raft_leader{partition="1"} 0
sharecoord_raft_leader{partition="12"} 1
sharecoord_raft_leader_node{partition="0"} 1
sharecoord_raft_leader_changes_total{partition="3"} 1
`
	led, held := parseLeaderships(strings.NewReader(text))
	if !slices.Equal(led, []int{0, 12}) || held != 3 {
		t.Fatalf("parseLeaderships = %v, %d; want [0 12], 3", led, held)
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{count(0), "0"}, {count(999.6), "1 000"}, {count(1234567), "1 234 567"},
		{dur(812 * time.Microsecond), "812 µs"}, {dur(1234 * time.Microsecond), "1.23 ms"},
		{dur(12340 * time.Microsecond), "12.3 ms"}, {dur(2500 * time.Millisecond), "2.50 s"},
		{spread(nil, ratio), "–"}, {spread([]float64{2}, ratio), "2.000"},
		{spread([]float64{3, 1, 2, 4}, ratio), "2.500 (1.000–4.000)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestNearestRank(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 20; i++ {
		xs = append(xs, time.Duration(i))
	}
	if p50, p99 := nearestRank(xs, 0.5), nearestRank(xs, 0.99); p50 != 10 || p99 != 20 {
		t.Fatalf("p50 %v, p99 %v of 1..20; want 10, 20", p50, p99)
	}
}

func TestParseConfigs(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgs, err := parseConfigs(options{coordinatord: "x=" + a + ",y=" + b, configs: "etcd3,coord3"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cfgs {
		got = append(got, c.label())
	}
	want := []string{"etcd 3 members", "coordinatord (x) 3 nodes", "coordinatord (y) 3 nodes"}
	if !slices.Equal(got, want) {
		t.Fatalf("labels %q, want %q", got, want)
	}
	if _, err := parseConfigs(options{coordinatord: a + "," + b, configs: "coord1"}); err == nil {
		t.Fatal("two unnamed binaries: no error")
	}
	if _, err := parseConfigs(options{coordinatord: a, configs: "coord2"}); err == nil {
		t.Fatal("unknown configuration: no error")
	}
}

// The etcd value is the coordinatord request itself, and each write of a share partition moves
// its start offset past the previous one's offsets.
func TestWorkload(t *testing.T) {
	w := newWorkload(2)
	k0, r0 := w.write()
	k1, _ := w.write()
	k2, r2 := w.write()
	if k0 != 0 || k1 != 1 || k2 != 0 {
		t.Fatalf("keys %d %d %d, want 0 1 0", k0, k1, k2)
	}
	p0, p2 := r0.GetTopics()[0].GetPartitions()[0], r2.GetTopics()[0].GetPartitions()[0]
	if p0.GetStartOffset() != 0 || p2.GetStartOffset() != batchesPerWrite*offsetsPerBatch || len(p2.GetStateBatches()) != batchesPerWrite {
		t.Fatalf("second write of partition 0: %v", p2)
	}
	if err := r2.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(r2); n < 50 || n > 200 {
		t.Fatalf("encoded write of %d bytes", n)
	}
	if key(3) != benchGroup+":"+benchTopic+":3" {
		t.Fatalf("key(3) = %q", key(3))
	}
}
