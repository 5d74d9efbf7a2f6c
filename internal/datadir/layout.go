package datadir

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/coordinatord/coordinatord/internal/statelog"
)

// PartitionPrefix starts the name of a state partition's directory in the data directory: the
// name is PartitionPrefix followed by the partition number in decimal.
const PartitionPrefix = "__share_group_state-"

// PartitionDir returns the directory of state partition p's log in dataDir.
func PartitionDir(dataDir string, p int) string {
	return filepath.Join(dataDir, PartitionPrefix+strconv.Itoa(p))
}

// ConfigStore returns the file of the config store in dataDir (its format: package groupcfg).
// Changes are appended to it; a rewrite of the whole store is written next to it first, as the
// same name with .tmp appended.
func ConfigStore(dataDir string) string {
	return filepath.Join(dataDir, "config", "store")
}

// JournalDir returns the directory of a single node's journal (package journal), which makes
// the state partitions' appends durable together with state.log.sync=journal.
func JournalDir(dataDir string) string {
	return filepath.Join(dataDir, "journal")
}

// RaftDir returns the directory of the Raft engine's own state on a node of a cluster (its log
// of entries, its snapshots, the node's identity).
func RaftDir(dataDir string) string {
	return filepath.Join(dataDir, "raft")
}

// Partitions returns the numbers of the state partitions whose directories path holds, in
// increasing order, or nil when it holds none or is not a directory at all (a partition's log
// directory or a segment file is no data directory). Files and other directories are ignored.
func Partitions(path string) ([]int, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var ps []int
	for _, en := range entries {
		if !en.IsDir() || !strings.HasPrefix(en.Name(), PartitionPrefix) {
			continue
		}
		p, err := strconv.Atoi(strings.TrimPrefix(en.Name(), PartitionPrefix))
		if err == nil && p >= 0 {
			ps = append(ps, p)
		}
	}
	sort.Ints(ps)
	return ps, nil
}

// SegmentFiles returns the paths of the segment files of the log in dir (a partition's
// directory) in offset order, for tools that read a log's files directly.
func SegmentFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if e.Type().IsRegular() && statelog.IsSegmentFile(e.Name()) {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(paths) // segment names sort in offset order
	return paths, nil
}
