package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// Bounds of one ImportRecords call: the records of a chunk become one Raft entry.
const (
	importChunkBytes   = 512 << 10
	importChunkRecords = 4096
	// importResources bounds the resources of one IncrementalAlterConfigs call of the import.
	importResources = 100
)

func newImportCommand(e env, f *clusterFlags) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "import --from DATA_DIR",
		Short: "Seed a new cluster with a single-node data directory: its state logs and dynamic configs",
		Long: "import copies every state partition's log of a single-node data directory (one a server ran\n" +
			"on without --initial-cluster, now stopped) into the cluster at --server, record for record at\n" +
			"the same offsets, through Raft: each chunk is acknowledged once a majority holds it, and\n" +
			"dump-log of any replica's data directory then prints what dump-log of the source prints. It\n" +
			"then sets the source's dynamic broker configs and group overrides on the cluster with\n" +
			"IncrementalAlterConfigs. The cluster must have the source's number of state partitions and\n" +
			"must not have been written to: a partition that holds records is refused, except the ones\n" +
			"an earlier import of the same source left, which it completes (so an interrupted import is\n" +
			"run again). --timeout bounds each chunk, retries included. Needs the alter_cluster and\n" +
			"alter_configs permissions when authorization is on.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return usageError{errors.New("give --from DATA_DIR, the single-node data directory to import")}
			}
			im, err := newImporter(e, f)
			if err != nil {
				return err
			}
			defer im.close()
			return im.run(cmd.Context(), from)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the single-node data directory to import (its server stopped)")
	return cmd
}

// importer copies a single-node data directory into a cluster, following each partition's
// leader.
type importer struct {
	e     env
	f     *clusterFlags
	opts  []grpc.DialOption
	conns map[string]*grpc.ClientConn
}

func newImporter(e env, f *clusterFlags) (*importer, error) {
	opts, err := f.tls.dialOptions()
	if err != nil {
		return nil, usageError{err}
	}
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return &importer{e: e, f: f, opts: opts, conns: map[string]*grpc.ClientConn{}}, nil
}

func (im *importer) close() {
	for _, c := range im.conns {
		_ = c.Close()
	}
}

func (im *importer) conn(addr string) (*grpc.ClientConn, error) {
	if c, ok := im.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, im.opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	im.conns[addr] = c
	return c, nil
}

// run imports the data directory from.
func (im *importer) run(ctx context.Context, from string) error {
	partitions, cfg, unlock, err := openImportSource(from)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := im.conn(im.f.server)
	if err != nil {
		return usageError{fmt.Errorf("--server %s: %w", im.f.server, err)}
	}
	callCtx, cancel := context.WithTimeout(ctx, im.f.timeout)
	nodes, err := pb.NewClusterServiceClient(c).ListNodes(callCtx, &pb.ListNodesRequest{})
	cancel()
	if err != nil {
		s := status.Convert(err)
		return fmt.Errorf("%s: %s: %s", im.f.server, s.Code(), s.Message())
	}
	n := int(nodes.GetPartitions())
	have := len(partitions)
	if cfg != nil {
		have = cfg.NumPartitions
	}
	if have != n || (len(partitions) > 0 && partitions[len(partitions)-1] >= n) {
		return fmt.Errorf("%s has %d state partitions, the cluster %d: keys are routed by their number, so start the cluster "+
			"with share.coordinator.state.topic.num.partitions=%d", from, have, n, have)
	}
	total := 0
	for _, p := range partitions {
		pi := &partitionImport{im: im, p: p, addr: im.f.server, have: -1}
		if err := pi.run(ctx, datadir.PartitionDir(from, p)); err != nil {
			return fmt.Errorf("state partition %d: %w", p, err)
		}
		total += pi.imported
	}
	fmt.Fprintf(im.e.stdout, "imported %d records into %d state partitions\n", total, len(partitions))
	if cfg == nil {
		fmt.Fprintln(im.e.stdout, "the source holds no config store: no dynamic configs to import")
		return nil
	}
	return im.importConfigs(ctx, cfg)
}

// openImportSource checks that from is a single-node data directory that no server uses, locks
// it, and returns its state partitions and its config store (nil when it has none).
func openImportSource(from string) ([]int, *groupcfg.StoredConfig, func(), error) {
	partitions, err := datadir.Partitions(from)
	if err != nil {
		return nil, nil, nil, usageError{fmt.Errorf("--from %s: %w", from, err)}
	}
	if partitions == nil {
		return nil, nil, nil, usageError{fmt.Errorf("--from %s holds no state partition (%sN directories): give a data directory", from, datadir.PartitionPrefix)}
	}
	if hasEngineState(from) {
		return nil, nil, nil, usageError{fmt.Errorf("--from %s is a cluster node's data directory (it holds %s): import reads a single node's", from, datadir.RaftDir(from))}
	}
	lock, err := datadir.Lock(vfs.OS(), from)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--from %s: %w (stop the server that uses it first)", from, err)
	}
	unlock := func() { _ = lock.Close() }
	if err := replayJournal(from, partitions); err != nil {
		unlock()
		return nil, nil, nil, err
	}
	cfg, err := groupcfg.ReadStore(vfs.OS(), datadir.ConfigStore(from))
	if errors.Is(err, fs.ErrNotExist) {
		return partitions, nil, unlock, nil
	}
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	return partitions, cfg, unlock, nil
}

// replayJournal appends to the source's state logs what its journal holds that they may lack (a
// server that crashed: state.log.sync=journal), as the server's next start would.
func replayJournal(from string, partitions []int) error {
	if _, err := os.Stat(datadir.JournalDir(from)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// The largest records a log may hold: the source's configured limit is not known here.
	held, err := recoverJournal(nil, from, partitions, statelog.Options{MaxRecordBytes: statelog.MaxBatchBytes - 4})
	if err != nil {
		return fmt.Errorf("--from %s: replay its journal into its state logs: %w", from, err)
	}
	if len(held) > 0 {
		return fmt.Errorf("--from %s: the logs of state partitions %v cannot be opened to append what its journal holds of them: "+
			"start its server once to see why, repair them, then import", from, held)
	}
	return nil
}

// partitionImport copies one state partition's log, in chunks, to the partition's leader.
type partitionImport struct {
	im   *importer
	p    int
	addr string // the node to ask: the leader, as last learnt
	// start is the source log's log-start offset (that of its first record), next the offset
	// of the first record in buf.
	start, next int64
	buf         [][]byte
	bytes       int
	// have is the end of what the cluster's log holds of the source, once known to be past
	// what this run appended (an earlier run's); -1 until then.
	have               int64
	imported, existing int
}

func (pi *partitionImport) run(ctx context.Context, dir string) error {
	first := true
	err := statelog.Scan(nil, dir, statelog.Options{}, func(offset int64, rec []byte) error {
		if first {
			pi.start, pi.next, first = offset, offset, false
		}
		if pi.bytes+len(rec) > importChunkBytes || len(pi.buf) == importChunkRecords {
			if err := pi.flush(ctx); err != nil {
				return err
			}
		}
		pi.buf = append(pi.buf, slices.Clone(rec))
		pi.bytes += len(rec)
		return nil
	})
	if errors.Is(err, statelog.ErrNoLog) {
		err = nil
	}
	if err == nil {
		err = pi.flush(ctx)
	}
	if err != nil {
		return err
	}
	if first {
		fmt.Fprintf(pi.im.e.stdout, "state partition %d: no records\n", pi.p)
		return nil
	}
	if pi.have > pi.next {
		return fmt.Errorf("the cluster's log holds offsets up to %d, past the source's end %d: it holds records the source does not", pi.have, pi.next)
	}
	fmt.Fprintf(pi.im.e.stdout, "state partition %d: offsets [%d, %d): %d records imported, %d already there\n",
		pi.p, pi.start, pi.next, pi.imported, pi.existing)
	return nil
}

// flush sends the buffered records, skipping what the cluster holds already.
func (pi *partitionImport) flush(ctx context.Context) error {
	recs, at := pi.buf, pi.next
	pi.next += int64(len(recs))
	pi.buf, pi.bytes = pi.buf[:0], 0
	for len(recs) > 0 {
		if pi.have > at {
			skip := int(min(pi.have-at, int64(len(recs))))
			recs, at, pi.existing = recs[skip:], at+int64(skip), pi.existing+skip
			continue
		}
		resp, err := pi.send(ctx, at, recs)
		if err != nil {
			return err
		}
		if resp.GetAppended() {
			pi.imported += len(recs)
			return nil
		}
		// The log is not where these records go: an earlier import of this source may have
		// left it further on; anything else is a cluster that was written to.
		if resp.GetStartOffset() != pi.start || resp.GetEndOffset() <= at {
			return fmt.Errorf("the cluster's log holds offsets [%d, %d), which records [%d, …) of a log starting at %d do not extend: "+
				"import seeds a cluster whose partitions were never written", resp.GetStartOffset(), resp.GetEndOffset(), at, pi.start)
		}
		pi.have = resp.GetEndOffset()
	}
	return nil
}

// send calls ImportRecords on the partition's leader, following NOT_LEADER answers and retrying
// while the partition has no leader, for at most --timeout.
func (pi *partitionImport) send(ctx context.Context, at int64, recs [][]byte) (*pb.ImportRecordsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, pi.im.f.timeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	req := &pb.ImportRecordsRequest{Partition: int32(pi.p), StartOffset: pi.start, Offset: at, Records: recs}
	for {
		c, err := pi.im.conn(pi.addr)
		if err != nil {
			return nil, err
		}
		resp, err := pb.NewClusterServiceClient(c).ImportRecords(ctx, req)
		if err == nil {
			return resp, nil
		}
		s := status.Convert(err)
		leader := notLeaderAddress(s)
		if leader != "" && leader != pi.addr {
			pi.addr = leader
			continue
		}
		// A proposal whose fate is unknown (UNAVAILABLE, DEADLINE_EXCEEDED) is sent again: if it
		// was committed, the answer says the log holds it already. So is one a node refused
		// while it took over the leadership it names as its own.
		if leader == "" && s.Code() != codes.Unavailable && s.Code() != codes.DeadlineExceeded {
			return nil, fmt.Errorf("%s: %s: %s", pi.addr, s.Code(), s.Message())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %s: %s (gave up after --timeout %s)", pi.addr, s.Code(), s.Message(), pi.im.f.timeout)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
		pi.addr = pi.im.f.server // ask again who leads
	}
}

// notLeaderAddress returns the leader's address an ImportRecords answer names, if any.
func notLeaderAddress(s *status.Status) string {
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonNotLeader {
			return info.GetMetadata()["leader_address"]
		}
	}
	return ""
}

// importConfigs sets the source's dynamic broker values and group overrides on the cluster.
func (im *importer) importConfigs(ctx context.Context, cfg *groupcfg.StoredConfig) error {
	set := func(values map[string]string) []*pb.AlterableConfig {
		var out []*pb.AlterableConfig
		for _, k := range slices.Sorted(maps.Keys(values)) {
			out = append(out, &pb.AlterableConfig{Name: k, ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_SET, Value: new(values[k])})
		}
		return out
	}
	var resources []*pb.AlterConfigsResource
	if len(cfg.Broker) > 0 {
		resources = append(resources, &pb.AlterConfigsResource{ResourceType: pb.ResourceType_RESOURCE_TYPE_BROKER, Configs: set(cfg.Broker)})
	}
	for _, g := range slices.Sorted(maps.Keys(cfg.Groups)) {
		resources = append(resources, &pb.AlterConfigsResource{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: g, Configs: set(cfg.Groups[g])})
	}
	c, err := im.conn(im.f.server)
	if err != nil {
		return err
	}
	client := pb.NewConfigServiceClient(c)
	for len(resources) > 0 {
		batch := resources[:min(len(resources), importResources)]
		resources = resources[len(batch):]
		callCtx, cancel := context.WithTimeout(ctx, im.f.timeout)
		resp, err := client.IncrementalAlterConfigs(callCtx, &pb.IncrementalAlterConfigsRequest{Resources: batch})
		cancel()
		if err != nil {
			s := status.Convert(err)
			return fmt.Errorf("set the imported configs: %s: %s: %s", im.f.server, s.Code(), s.Message())
		}
		var failed []string
		for _, r := range resp.GetResponses() {
			if r.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				failed = append(failed, fmt.Sprintf("%s %q: %s: %s", resourceKind(r.GetResourceType()), r.GetResourceName(), r.GetErrorCode(), r.GetErrorMessage()))
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("the cluster refused imported configs: %v", failed)
		}
	}
	fmt.Fprintf(im.e.stdout, "imported %d dynamic broker configs and the overrides of %d groups\n", len(cfg.Broker), len(cfg.Groups))
	return nil
}

func resourceKind(t pb.ResourceType) string {
	if t == pb.ResourceType_RESOURCE_TYPE_BROKER {
		return "broker"
	}
	return "group"
}
