package shardconfig

import (
	"time"

	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

// FromBroker returns the options of state partition p of the data directory dataDir (its log
// lives in datadir.PartitionDir), as the broker settings b decide them: segment size, load
// buffer, append linger, write timeout, prune and cold-snapshot intervals. Metrics, Log.Metrics
// and Log.SyncGroup are left to the caller.
func FromBroker(b groupcfg.Broker, dataDir string, p int) shard.Options {
	return shard.Options{
		Partition: p,
		LogDir:    datadir.PartitionDir(dataDir, p),
		Log: statelog.Options{
			SegmentBytes:    int64(b.SegmentBytes()),
			ReadBufferBytes: b.LoadBufferSize(),
		},
		AppendLingerMs:       b.AppendLingerMs(),
		WriteTimeout:         time.Duration(b.WriteTimeoutMs()) * time.Millisecond,
		PruneInterval:        time.Duration(b.PruneIntervalMs()) * time.Millisecond,
		ColdSnapshotInterval: time.Duration(b.ColdPartitionSnapshotIntervalMs()) * time.Millisecond,
	}
}
