package shardconfig

import (
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// Partition is how the server runs one state partition: its shard's options, and the directory
// and options of its log.
type Partition struct {
	Shard  shard.Options
	LogDir string
	Log    statelog.Options
}

// FromBroker returns how state partition p of the data directory dataDir runs (its log lives in
// datadir.PartitionDir), as the broker settings b decide it: segment size, load buffer, append
// linger, write timeout, prune and cold-snapshot intervals, and the log's metrics label.
// Shard.Metrics, Log.Metrics, Log.SyncGroup and Log.Journal are left to the caller.
func FromBroker(b groupcfg.Broker, dataDir string, p int) Partition {
	return Partition{
		Shard: shard.Options{
			Partition:            p,
			AppendLingerMs:       b.AppendLingerMs(),
			WriteTimeout:         time.Duration(b.WriteTimeoutMs()) * time.Millisecond,
			PruneInterval:        time.Duration(b.PruneIntervalMs()) * time.Millisecond,
			ColdSnapshotInterval: time.Duration(b.ColdPartitionSnapshotIntervalMs()) * time.Millisecond,
		},
		LogDir: datadir.PartitionDir(dataDir, p),
		Log: statelog.Options{
			SegmentBytes:    int64(b.SegmentBytes()),
			ReadBufferBytes: b.LoadBufferSize(),
			Name:            strconv.Itoa(p),
		},
	}
}

// LocalLog returns the opener of the partition's log on a single node.
func (pc Partition) LocalLog(logger *zap.Logger) *shard.LocalLog {
	return shard.NewLocalLog(logger, pc.LogDir, pc.Log)
}
