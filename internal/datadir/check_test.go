package datadir

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// wantOutcome fails the test unless err is nil when parts is, and otherwise an error whose
// message holds every one of parts, with %s in them standing for dir.
func wantOutcome(t *testing.T, err error, dir string, parts []string) {
	t.Helper()
	switch {
	case parts == nil && err != nil:
		t.Fatalf("error %v, want none", err)
	case parts != nil && err == nil:
		t.Fatalf("no error, want one saying %q", parts)
	}
	for _, p := range parts {
		if p = strings.ReplaceAll(p, "%s", dir); !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

// dataDirWith returns a new directory holding the directories of the state partitions ps.
func dataDirWith(t *testing.T, ps []int) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range ps {
		mkdirs(t, dir, PartitionPrefix+strconv.Itoa(p))
	}
	return dir
}

// Check takes a directory, or a path where one can be created, and refuses a file and a symbolic
// link to nothing (a volume that is not mounted).
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFiles(t, dir, 0, "file")
	target := filepath.Join(dir, "unmounted")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	linkToDir := filepath.Join(dir, "link-to-dir")
	if err := os.Symlink(dir, linkToDir); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       []string // the error's parts; none: no error
		warns      bool
	}{
		{"directory", dir, nil, false},
		{"link to a directory", linkToDir, nil, false},
		{"missing", filepath.Join(dir, "new"), nil, true},
		{"file", file, []string{"--data-dir " + file + " is not a directory"}, false},
		{"link to nothing", link, []string{"--data-dir " + link + " is a symbolic link to " + target + ", which does not exist"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			wantOutcome(t, Check(zap.New(core), tc.path), dir, tc.want)
			if warned := logs.FilterMessageSnippet("the data directory does not exist: creating it").Len() == 1; warned != tc.warns {
				t.Fatalf("warned %v, want %v: %v", warned, tc.warns, logs.All())
			}
		})
	}
}

func TestHasConfigStore(t *testing.T) {
	dir := t.TempDir()
	if HasConfigStore(dir) {
		t.Fatal("an empty data directory has a config store")
	}
	mkdirs(t, dir, "config")
	writeFiles(t, filepath.Join(dir, "config"), 10, "store")
	if !HasConfigStore(dir) {
		t.Fatal("the config store is not found")
	}
}

// CheckPartitionCount refuses a count that the partitions' directories contradict, saying which
// count they were made with.
func TestCheckPartitionCount(t *testing.T) {
	const key = "share.coordinator.state.topic.num.partitions"
	for _, tc := range []struct {
		name string
		dirs []int
		n    int
		want []string
	}{
		{"no partitions", nil, 50, nil},
		{"as many", []int{0, 1, 2, 3, 4}, 5, nil},
		{"a gap below the last", []int{0, 1, 3}, 4, nil},
		{"more than configured", []int{0, 1, 2, 3, 4}, 3, []string{
			key + "=3, but --data-dir %s holds the state partitions of 5 (__share_group_state-0 to __share_group_state-4)",
			"start with " + key + "=5"}},
		{"fewer than configured", []int{0, 1, 2, 3, 4}, 50, []string{
			key + "=50, but --data-dir %s holds state partitions only up to __share_group_state-4",
			"start with " + key + "=5", "__share_group_state-5 to __share_group_state-49 are missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := dataDirWith(t, tc.dirs)
			wantOutcome(t, CheckPartitionCount(dir, tc.n), dir, tc.want)
		})
	}
}

// CheckMissingPartitions refuses a missing partition directory only while another partition's log
// holds records: a segment with more than its header.
func TestCheckMissingPartitions(t *testing.T) {
	const seg = "00000000000000000000-0000000000000001.seg"
	holding, headerOnly := statelog.SegmentHeaderBytes+1, statelog.SegmentHeaderBytes
	for _, tc := range []struct {
		name    string
		dirs    []int
		segment int    // size of partition 0's segment; 0: none
		other   string // another file in partition 0, of the holding size
		n       int
		want    []string
	}{
		{"none missing", []int{0, 1, 2}, holding, "", 3, nil},
		{"missing, no records", []int{0, 2}, headerOnly, "", 3, nil},
		{"missing, no segment", []int{0, 2}, 0, "junk.seg", 3, nil},
		{"missing, no partitions", nil, 0, "", 3, nil},
		{"missing next to records", []int{0, 2}, holding, "", 3, []string{
			"--data-dir %s: the directories of 1 state partitions are missing (__share_group_state-1) while __share_group_state-0 holds records"}},
		{"many missing", []int{0}, holding, "", 9, []string{
			"the directories of 8 state partitions are missing (__share_group_state-1, __share_group_state-2, " +
				"__share_group_state-3, __share_group_state-4, __share_group_state-5, and 3 more)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := dataDirWith(t, tc.dirs)
			if tc.segment > 0 {
				writeFiles(t, PartitionDir(dir, 0), tc.segment, seg)
			}
			if tc.other != "" {
				writeFiles(t, PartitionDir(dir, 0), holding, tc.other)
			}
			wantOutcome(t, CheckMissingPartitions(dir, tc.n), dir, tc.want)
		})
	}
}

// CreatePartitionDirs makes every state partition's directory before any partition loads; one it
// cannot create (a file in its place) is left to its partition, with a warning.
func TestCreatePartitionDirs(t *testing.T) {
	dataDir := t.TempDir()
	blocked := filepath.Join(dataDir, "__share_group_state-2")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	CreatePartitionDirs(zap.New(core), vfs.OS(), dataDir, 4)
	for _, p := range []int{0, 1, 3} {
		if st, err := os.Stat(filepath.Join(dataDir, "__share_group_state-"+strconv.Itoa(p))); err != nil || !st.IsDir() {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	if logs.FilterMessageSnippet("cannot create a state partition's directory").Len() != 1 {
		t.Fatalf("want one warning for the blocked partition, got %v", logs.All())
	}
}

// The directories CreatePartitionDirs made survive a power cut; a data directory it cannot sync
// is left to the partitions, with a warning.
func TestCreatePartitionDirsIsDurable(t *testing.T) {
	mem := faultfs.NewCrashFS() // its root is the data directory, durable from the start
	CreatePartitionDirs(nil, mem, "/", 3)
	got, err := mem.CrashClone(faultfs.CrashOptions{}).ReadDir("/")
	if err != nil || strings.Join(got, " ") != "__share_group_state-0 __share_group_state-1 __share_group_state-2" {
		t.Fatalf("after a power cut the data directory holds %v (%v)", got, err)
	}

	core, logs := observer.New(zapcore.WarnLevel)
	fsys := faultfs.Wrap(faultfs.NewCrashFS(), faultfs.Match(faultfs.OnKinds(faultfs.OpSyncDir), syscall.EIO))
	CreatePartitionDirs(zap.New(core), fsys, "/data", 3)
	if logs.FilterMessageSnippet("cannot sync the data directory").Len() != 1 {
		t.Fatalf("want one warning for the failed sync, got %v", logs.All())
	}
}

func TestCheckMode(t *testing.T) {
	single, clustered, empty := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Dir(ConfigStore(single)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ConfigStore(single), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(RaftDir(clustered), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir     string
		cluster bool
		ok      bool
	}{{single, false, true}, {single, true, false}, {clustered, true, true}, {clustered, false, false}, {empty, true, true}, {empty, false, true}} {
		if err := CheckMode(c.dir, c.cluster); (err == nil) != c.ok {
			t.Errorf("CheckMode(%s, cluster %v) = %v, want ok %v", c.dir, c.cluster, err, c.ok)
		}
	}
}
