package datadir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The names of the layout are part of the format: existing data directories are found by them.
func TestLayoutNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{PartitionDir("/var/lib/coordinatord", 0), "/var/lib/coordinatord/__share_group_state-0"},
		{PartitionDir("data", 49), "data/__share_group_state-49"},
		{PartitionDir("./data/", 7), "data/__share_group_state-7"},
		{ConfigStore("/var/lib/coordinatord"), "/var/lib/coordinatord/config/store"},
		{ConfigStore("./data"), "data/config/store"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

// mkdirs creates the directories names in dir.
func mkdirs(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// writeFiles creates the files names in dir, each holding size bytes.
func writeFiles(t *testing.T, dir string, size int, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Partitions lists the partitions' directories in numeric order and nothing else.
func TestPartitions(t *testing.T) {
	dir := t.TempDir()
	mkdirs(t, dir, "__share_group_state-10", "__share_group_state-2", "__share_group_state-0", "config",
		"__share_group_state-x", "__share_group_state--1", "share_group_state-5")
	writeFiles(t, dir, 0, "__share_group_state-3", "LOCK")
	ps, err := Partitions(dir)
	if err != nil || !slices.Equal(ps, []int{0, 2, 10}) {
		t.Fatalf("Partitions = %v, %v; want [0 2 10]", ps, err)
	}

	empty := t.TempDir()
	if ps, err := Partitions(empty); err != nil || ps != nil {
		t.Fatalf("Partitions of an empty directory = %v, %v; want nil", ps, err)
	}
	file := filepath.Join(dir, "LOCK")
	if ps, err := Partitions(file); err != nil || ps != nil {
		t.Fatalf("Partitions of a file = %v, %v; want nil", ps, err)
	}
	if _, err := Partitions(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Partitions of a missing path: %v, want ErrNotExist", err)
	}
}

// SegmentFiles lists a log's segment files in offset order, and no other file.
func TestSegmentFiles(t *testing.T) {
	dir := t.TempDir()
	segs := []string{
		"00000000000000000000-0000000000000001.seg",
		"00000000000000051200-0000000000000002.seg",
		"00000000000000102400-0000000000000003.seg",
	}
	writeFiles(t, dir, 32, segs[2], segs[0], segs[1], "start-offset", "clean-end", "LOCK", "junk.seg",
		"0-1.seg", "00000000000000000000-0000000000000001.seg.tmp")
	mkdirs(t, dir, "00000000000000204800-0000000000000004.seg")
	got, err := SegmentFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range segs {
		want = append(want, filepath.Join(dir, s))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SegmentFiles = %v, want %v", got, want)
	}
	if _, err := SegmentFiles(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SegmentFiles of a missing directory: %v, want ErrNotExist", err)
	}
}
