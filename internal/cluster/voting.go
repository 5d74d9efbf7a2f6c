package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// votersFileName, in the Raft engine's directory, lists the replicas of this node that joined a
// shard and were made voters since. Raft needs to know at a replica's start whether it votes, and
// it must match the membership of the replica's latest snapshot, which the engine starts from
// (it replays the configuration changes after it, including the replica's own addition as a
// non-voting replica, which a replica started as a voter refuses). The engine does not say, so
// the node records it: a founding replica (generation 0) always votes; a replica that joined
// starts as non-voting until this file names it, and the node adds it once the metadata shows
// the replica promoted and a snapshot taken after the promotion holds it. A running replica
// becomes a voter the moment its promotion is applied. A replica promoted and snapshotted just
// before a crash, but not recorded, restarts as non-voting; the engine makes it a voter again as
// it restores the snapshot, whose membership lists it among the voters (or as it applies the
// promotion again, if its log was synced before it), and the node records it then.
const votersFileName = "coordinatord-voters.json"

// voters is this node's record of its joined replicas that vote.
type voters struct {
	path string
	mu   sync.Mutex
	ids  map[string]uint64 // shard id → replica id
}

func openVoters(dir string) (*voters, error) {
	v := &voters{path: filepath.Join(dir, votersFileName), ids: map[string]uint64{}}
	b, err := os.ReadFile(v.path)
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: read %s: %w", v.path, err)
	}
	if err := json.Unmarshal(b, &v.ids); err != nil {
		return nil, fmt.Errorf("cluster: %s is damaged: %w", v.path, err)
	}
	return v, nil
}

// votes reports whether replica of shard votes, as far as this node recorded.
func (v *voters) votes(shard, replica uint64) bool {
	if replica == nodeOf(replica) {
		return true // a founding replica
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ids[strconv.FormatUint(shard, 10)] == replica
}

// record notes, durably, that replica of shard votes.
func (v *voters) record(shard, replica uint64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := strconv.FormatUint(shard, 10)
	if v.ids[key] == replica {
		return nil
	}
	v.ids[key] = replica
	b, err := json.Marshal(v.ids)
	if err != nil {
		return err
	}
	if err := vfs.ReplaceFile(vfs.OS(), filepath.Dir(v.path), votersFileName+".tmp", votersFileName, b); err != nil {
		return fmt.Errorf("cluster: record the replicas that vote: %w", err)
	}
	return nil
}
