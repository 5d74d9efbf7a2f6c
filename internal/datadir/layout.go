package datadir

import (
	"path/filepath"
	"strconv"
)

// PartitionPrefix starts the name of a state partition's directory in the data directory: the
// name is PartitionPrefix followed by the partition number in decimal.
const PartitionPrefix = "__share_group_state-"

// PartitionDir returns the directory of state partition p's log in dataDir.
func PartitionDir(dataDir string, p int) string {
	return filepath.Join(dataDir, PartitionPrefix+strconv.Itoa(p))
}
