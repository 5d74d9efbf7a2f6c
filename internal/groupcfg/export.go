package groupcfg

import (
	"fmt"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// StoredConfig is what a single node's config store holds: the number of state partitions its
// data directory was created with, its dynamic broker values and its group overrides, as
// canonical text.
type StoredConfig struct {
	NumPartitions int
	Broker        map[string]string
	Groups        map[string]map[string]string
}

// ReadStore reads the config store file at path without changing anything (for cluster import,
// which applies what it holds to a cluster with IncrementalAlterConfigs).
func ReadStore(fsys vfs.FS, path string) (*StoredConfig, error) {
	if fsys == nil {
		fsys = vfs.OS()
	}
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("read the config store: %w", err)
	}
	st, err := decodeStore(path, data)
	if err != nil {
		return nil, err
	}
	return &StoredConfig{NumPartitions: st.NumPartitions, Broker: st.Broker, Groups: st.Groups}, nil
}
