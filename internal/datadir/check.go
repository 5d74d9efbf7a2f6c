package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// Check refuses a dataDir that cannot be the data directory (a file, or a symbolic link whose
// target is missing), and warns when it does not exist yet: it is then created, empty.
func Check(logger *zap.Logger, dataDir string) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	switch st, err := os.Stat(dataDir); {
	case errors.Is(err, fs.ErrNotExist) && isSymlink(dataDir):
		// MkdirAll would fail with "file exists"; the link's target is what is missing.
		target, _ := os.Readlink(dataDir)
		return fmt.Errorf("--data-dir %s is a symbolic link to %s, which does not exist (is its volume mounted?): "+
			"create the directory, or point --data-dir at it", dataDir, target)
	case errors.Is(err, fs.ErrNotExist):
		// A typo or a volume that is not mounted would otherwise look like a healthy, empty server.
		logger.Warn("the data directory does not exist: creating it, with no state and no stored configuration",
			zap.String("data_dir", dataDir))
	case err == nil && !st.IsDir():
		return fmt.Errorf("--data-dir %s is not a directory", dataDir)
	}
	return nil
}

// isSymlink reports whether path itself (not what it points to) is a symbolic link.
func isSymlink(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode()&fs.ModeSymlink != 0
}

// HasConfigStore reports whether dataDir holds a config store, or may: only a store file that
// certainly does not exist counts as absent, so that one that cannot be examined is opened, and
// its error reported, rather than taken for a first start.
func HasConfigStore(dataDir string) bool {
	_, err := os.Stat(ConfigStore(dataDir))
	return !errors.Is(err, fs.ErrNotExist)
}

// CheckMode refuses to start a single node (cluster false) on a cluster node's data directory,
// and a cluster node on a single node's: the one finds no config store where the other keeps
// its configuration, and the other's logs hold no record of Raft entries.
func CheckMode(dataDir string, cluster bool) error {
	_, err := os.Stat(RaftDir(dataDir))
	hasRaft := !errors.Is(err, fs.ErrNotExist)
	switch {
	case cluster && HasConfigStore(dataDir):
		return fmt.Errorf("--data-dir %s holds the data of a single node (its config store %s): a cluster node cannot start on it; "+
			"start a new cluster on empty data directories, or run this node without --initial-cluster", dataDir, ConfigStore(dataDir))
	case !cluster && hasRaft:
		return fmt.Errorf("--data-dir %s holds the data of a cluster node (%s): start it with the --initial-cluster it was created with",
			dataDir, RaftDir(dataDir))
	}
	return nil
}

// CheckPartitionCount refuses a partition count n that the state partitions' directories already
// in dataDir contradict. The config store records the count on first start, but a store that was
// lost or moved aside would record whatever is configured now; the directories still tell.
func CheckPartitionCount(dataDir string, n int) error {
	ps, err := Partitions(dataDir)
	if err != nil || len(ps) == 0 {
		return err
	}
	have := ps[len(ps)-1] + 1
	switch {
	case have > n:
		return fmt.Errorf("%s=%d, but --data-dir %s holds the state partitions of %d (%s0 to %s%d): changing the count would "+
			"route share-group state keys to other partitions; start with %s=%d",
			groupcfg.KeyNumPartitions, n, dataDir, have, PartitionPrefix, PartitionPrefix, have-1, groupcfg.KeyNumPartitions, have)
	case have < n:
		// Without the store the two cannot be told apart: a data directory created with fewer
		// partitions, or one whose last partitions' directories are missing (a partial restore).
		return fmt.Errorf("%s=%d, but --data-dir %s holds state partitions only up to %s%d: either it was created with %d "+
			"(start with %s=%d; changing the count would route share-group state keys to other partitions), or the "+
			"directories %s%d to %s%d are missing (restore them from the backup it came from)",
			groupcfg.KeyNumPartitions, n, dataDir, PartitionPrefix, have-1, have, groupcfg.KeyNumPartitions, have,
			PartitionPrefix, have, PartitionPrefix, n-1)
	}
	return nil
}

// CheckMissingPartitions refuses a data directory in which the directory of one of the n state
// partitions is missing while another partition's log holds records: the server would create an
// empty log in its place, and the state of every share partition routed there would be gone
// without a word (a partial restore, a directory moved aside or deleted by hand). A data
// directory none of whose logs holds a record passes: a first start interrupted before it
// created every directory leaves one. To start a partition empty on purpose, create its
// directory.
func CheckMissingPartitions(dataDir string, n int) error {
	var missing []string
	holder := ""
	for p := range n {
		dir := PartitionDir(dataDir, p)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, filepath.Base(dir))
			continue
		}
		// Any other error is the partition's own: its load reports it.
		for _, en := range entries {
			if holder != "" || !statelog.IsSegmentFile(en.Name()) {
				continue
			}
			if info, err := en.Info(); err == nil && info.Size() > statelog.SegmentHeaderBytes {
				holder = filepath.Base(dir)
			}
		}
	}
	if len(missing) == 0 || holder == "" {
		return nil
	}
	shown := missing
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(missing)-5))
	}
	return fmt.Errorf("--data-dir %s: the directories of %d state partitions are missing (%s) while %s holds records: "+
		"their logs would start empty, and the share-group state they held would be lost; restore them from a backup, "+
		"or, to start them empty on purpose, create them as empty directories", dataDir, len(missing), strings.Join(shown, ", "), holder)
}

// CreatePartitionDirs creates the directories of the n state partitions in dataDir, and makes the
// entries durable, before any partition loads and takes writes: a partition loading late (or
// retrying a failed create) must not leave its directory missing next to another's acknowledged
// records, which CheckMissingPartitions would refuse at the next start. A directory that cannot
// be created (or a data directory that cannot be synced) is left to the partitions, which report
// the error and retry; it is logged at WARN.
func CreatePartitionDirs(logger *zap.Logger, fsys vfs.FS, dataDir string, n int) {
	if logger == nil {
		logger = zap.NewNop()
	}
	for p := range n {
		if err := fsys.MkdirAll(PartitionDir(dataDir, p)); err != nil {
			logger.Warn("cannot create a state partition's directory; the partition retries when it loads", zap.Error(err))
		}
	}
	if err := fsys.SyncDir(dataDir); err != nil {
		logger.Warn("cannot sync the data directory after creating the state partitions' directories; each partition syncs it again when it loads", zap.Error(err))
	}
}
