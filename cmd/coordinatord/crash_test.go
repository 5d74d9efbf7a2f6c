package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

var (
	crashRounds = flag.Int("crash.rounds", 20, "crash suite: rounds per signal (SIGKILL, SIGTERM)")
	crashSeed   = flag.Uint64("crash.seed", 0, "crash suite: random seed (0: from the clock; the seed is logged)")
	crashSync   = flag.String("crash.sync", "journal,file,filesystem", "crash suite: the state.log.sync modes to run it with, comma-separated")
)

const topicB = "ASNFZ4mrze8BI0VniavN7w"

// crashArgs run the server with small segments, frequent pruning and cold snapshots, so that
// crashes also interrupt segment rolls, log-start moves and background snapshots, with the
// state-log sync mode syncMode (state.log.sync).
func crashArgs(syncMode string) []string {
	return []string{
		"--override", "share.coordinator.state.topic.num.partitions=8",
		"--override", "share.coordinator.state.topic.segment.bytes=1048576",
		"--override", "share.coordinator.state.topic.prune.interval.ms=250",
		"--override", "share.coordinator.cold.partition.snapshot.interval.ms=600",
		"--override", "state.log.sync=" + syncMode,
	}
}

// crashKey is one share partition of the workload with its model. Only its worker touches it
// during a round; the suite reads and resolves it between rounds.
type crashKey struct {
	group     string
	topic     string
	partition int32

	cur keyState  // the state with every acknowledged operation applied
	alt *keyState // with the one unconfirmed operation applied too; nil when none
	// frozen: an operation on the key failed without a definite answer; the key is left alone
	// until the next verification tells whether it was applied.
	frozen     bool
	maxState   int32    // highest state epoch sent
	maxLeader  int32    // highest leader epoch sent (every later call uses it, so none is fenced)
	pendingAck int      // operations acknowledged since the key was last verified
	history    []string // the operations since the last verification, for failure reports
}

func (k *crashKey) String() string {
	return k.group + ":" + k.topic + ":" + strconv.Itoa(int(k.partition))
}

// configKey is one group config of the workload with its model ("" = not set).
type configKey struct {
	group, name string
	cur         string
	alt         *string
}

// crashStats are the suite's figures.
type crashStats struct {
	mu                   sync.Mutex
	rounds               int
	acked                int // operations answered with success (state and config)
	verified             int // acknowledged operations whose effect a verification confirmed
	liveChecks           int // reads during rounds that matched the model
	uncertain            int // operations without a definite answer (in flight at the signal)
	uncertainApplied     int // ... that turned out applied
	losses               int
	retriableDuringRound int // retriable per-partition answers (e.g. a commit slower than the write timeout)
	answeredAfterSignal  int // operations sent before the signal and acknowledged after it (drained)
}

func (s *crashStats) add(f func(*crashStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// crashSuite runs rounds of: start the server, run the workload, signal the server at a random
// moment, restart it and verify every key and config against the model.
type crashSuite struct {
	t       *testing.T
	sig     syscall.Signal
	dir     string
	args    []string // the server's arguments besides addresses and data directory
	rng     *rand.Rand
	workers [][]*crashKey
	configs []*configKey
	// configPending counts alters acknowledged since the last verification (config worker only).
	configPending int
	stats         crashStats
	failMu        sync.Mutex
	failure       string
	// signalAt is when this round's signal was sent (Unix nanoseconds; 0 before it).
	signalAt atomic.Int64
}

func (s *crashSuite) fail(format string, args ...any) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.failure == "" {
		s.failure = fmt.Sprintf(format, args...)
	}
}

func (s *crashSuite) failed() string {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return s.failure
}

// TestCrashRecovery is the crash suite: concurrent clients run a realistic mix (initialize,
// writes with overlapping, duplicated and unsorted batches, multi-key writes, reads that raise
// leader epochs, summaries, deletes and re-initializations, group config alters) while the server
// is killed with SIGKILL — or stopped with SIGTERM — at random moments. After each restart every
// key must equal the model exactly: every acknowledged operation applied, an operation without a
// definite answer applied entirely or not at all, deleted keys still deleted, acknowledged config
// changes in force. It runs once per state.log.sync mode of -crash.sync (the shared journal,
// per-file fdatasync, and one syncfs shared by all partitions); -crash.rounds sets the rounds per
// signal.
func TestCrashRecovery(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash suite seed %d (rerun with -crash.seed=%d)", seed, seed)
	// A binary built with the race detector sleeps a second before exiting by default; a race it
	// finds is still reported (and fails the exit status).
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	for _, mode := range strings.Split(*crashSync, ",") {
		t.Run("sync="+mode, func(t *testing.T) {
			for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
				t.Run(signalName(sig), func(t *testing.T) {
					s := newCrashSuite(t, sig, rand.New(rand.NewPCG(seed, uint64(i))), crashArgs(mode))
					s.run(*crashRounds)
				})
			}
		})
	}
}

func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

func newCrashSuite(t *testing.T, sig syscall.Signal, rng *rand.Rand, args []string) *crashSuite {
	s := &crashSuite{t: t, sig: sig, dir: t.TempDir(), rng: rng, args: args}
	const workers = 6
	for w := range workers {
		group := "crash-" + strconv.Itoa(w)
		var keys []*crashKey
		for _, topic := range []string{topicA, topicB} {
			for p := range int32(4) {
				keys = append(keys, &crashKey{group: group, topic: topic, partition: p})
			}
		}
		s.workers = append(s.workers, keys)
		for _, name := range []string{"share.delivery.count.limit", "share.record.lock.duration.ms", "share.snapshot.update.records.per.snapshot"} {
			s.configs = append(s.configs, &configKey{group: group, name: name})
		}
	}
	return s
}

func (s *crashSuite) run(rounds int) {
	t := s.t
	p := startProc(t, s.dir, s.args...)
	for round := 1; round <= rounds; round++ {
		s.round(p, round)
		if f := s.failed(); f != "" {
			t.Fatalf("round %d: %s\n%s", round, f, p.log())
		}
		p = startProc(t, s.dir, s.args...)
		s.verify(p, round)
		if f := s.failed(); f != "" {
			t.Fatalf("round %d, after restart: %s\n%s", round, f, p.log())
		}
		s.stats.rounds++
	}
	p.stop(syscall.SIGTERM)
	st := &s.stats
	t.Logf("crash suite (%s): %d rounds survived, %d operations acknowledged, %d operations verified after restarts "+
		"(+%d live reads matched), %d operations sent before the signal and acknowledged after it, "+
		"%d operations without a definite answer (%d of them retriable answers during a round; %d found applied, all-or-nothing), %d losses",
		signalName(s.sig), st.rounds, st.acked, st.verified, st.liveChecks, st.answeredAfterSignal, st.uncertain, st.retriableDuringRound,
		st.uncertainApplied, st.losses)
	if st.losses != 0 {
		t.Fatalf("%d losses", st.losses)
	}
}

// round runs the workload on p and signals it at a random moment.
func (s *crashSuite) round(p *proc, round int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.signalAt.Store(0)
	var wg sync.WaitGroup
	for w, keys := range s.workers {
		rng := rand.New(rand.NewPCG(s.rng.Uint64(), uint64(w)))
		wg.Go(func() { s.stateWorker(ctx, p.state, keys, rng) })
	}
	crng := rand.New(rand.NewPCG(s.rng.Uint64(), 99))
	wg.Go(func() { s.configWorker(ctx, p.config, crng) })

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// The signal comes at a random moment of the workload (a deliberate timer, not a wait).
	delay := time.Duration(50+s.rng.IntN(450)) * time.Millisecond
	select {
	case <-time.After(delay):
	case <-done:
		s.fail("every worker stopped before the signal (round %d)", round)
	}
	// The clients' connection stays open until every worker has stopped, so that calls are in
	// flight when the signal lands (and, for SIGTERM, are drained rather than cut off).
	conn := p.conn
	p.conn = nil
	closed := make(chan struct{})
	go func() {
		<-done
		_ = conn.Close()
		close(closed)
	}()
	s.signalAt.Store(time.Now().UnixNano())
	code := p.stop(s.sig)
	<-closed
	if s.sig == syscall.SIGTERM && code != 0 {
		s.fail("exit status %d after SIGTERM", code)
	}
}

// definite reports whether a per-partition code settles the operation (applied or refused for
// good); the retriable codes leave it undecided.
func definite(c pb.ErrorCode) bool {
	return c != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE && c != pb.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS
}

// serverGone reports whether a gRPC error means the server went away (the signal).
func serverGone(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.Canceled || c == codes.DeadlineExceeded
}

// stateWorker runs operations on its keys, one at a time, until the server goes away.
func (s *crashSuite) stateWorker(ctx context.Context, client pb.ShareCoordinatorServiceClient, keys []*crashKey, rng *rand.Rand) {
	for ctx.Err() == nil && s.failed() == "" {
		var live []*crashKey
		for _, k := range keys {
			if !k.frozen {
				live = append(live, k)
			}
		}
		if len(live) == 0 {
			return
		}
		k := live[rng.IntN(len(live))]
		var gone bool
		switch r := rng.IntN(100); {
		case !k.cur.exists:
			gone = s.doInitialize(ctx, client, k, rng)
		case r < 45:
			gone = s.doWrite(ctx, client, []*crashKey{k}, rng)
		case r < 55:
			// A multi-key write: up to three initialized keys of the group in one request.
			group := []*crashKey{k}
			for _, o := range live {
				if o != k && o.cur.exists && len(group) < 3 && rng.IntN(2) == 0 {
					group = append(group, o)
				}
			}
			gone = s.doWrite(ctx, client, group, rng)
		case r < 68:
			gone = s.doRead(ctx, client, k, k.maxLeader+int32(rng.IntN(2)))
		case r < 78:
			gone = s.doSummary(ctx, client, k)
		case r < 84:
			gone = s.doDelete(ctx, client, k)
		default:
			gone = s.doInitialize(ctx, client, k, rng)
		}
		if gone {
			return
		}
	}
}

// settle records the answer to an operation on k whose effect would be next: acknowledged (cur
// becomes next), refused for good (an error for the suite: the workload sends only valid calls),
// or undecided (k is frozen with next as the alternative).
func (s *crashSuite) settle(k *crashKey, op string, begin int64, next keyState, code pb.ErrorCode, msg string, err error) {
	answer := code.String()
	if err != nil {
		answer = err.Error()
	}
	k.history = append(k.history, op+" → "+answer)
	switch {
	case err != nil:
		if !serverGone(err) {
			s.fail("%v: call failed: %v", k, err)
		}
		k.alt, k.frozen = &next, true
		s.stats.add(func(st *crashStats) { st.uncertain++ })
	case code == pb.ErrorCode_ERROR_CODE_NONE:
		k.cur = next
		k.pendingAck++
		drained := s.signalAt.Load() > begin
		s.stats.add(func(st *crashStats) {
			st.acked++
			if drained {
				st.answeredAfterSignal++
			}
		})
	case !definite(code):
		k.alt, k.frozen = &next, true
		s.stats.add(func(st *crashStats) { st.uncertain++; st.retriableDuringRound++ })
	default:
		s.fail("%v: answered %v %s", k, code, msg)
	}
}

func (s *crashSuite) doInitialize(ctx context.Context, client pb.ShareCoordinatorServiceClient, k *crashKey, rng *rand.Rand) bool {
	k.maxState++
	start := []int64{0, -1, max(k.cur.start, 0) + int64(rng.IntN(50))}[rng.IntN(3)]
	begin := time.Now().UnixNano()
	resp, err := client.InitializeShareGroupState(ctx, &pb.InitializeShareGroupStateRequest{GroupId: k.group, Topics: []*pb.InitializeStateTopic{{
		TopicId: k.topic, Partitions: []*pb.InitializeStatePartition{{Partition: k.partition, StateEpoch: k.maxState, StartOffset: start}}}}})
	r := firstPartition(resp.GetResults())
	s.settle(k, fmt.Sprintf("initialize(epoch %d, start %d)", k.maxState, start), begin, k.cur.initialized(k.maxState, start), r.GetErrorCode(), r.GetErrorMessage(), err)
	return err != nil
}

// randomBatches returns 1 to 5 batches near the key's start offset, overlapping, duplicated and
// out of order at random, with any delivery state and small counts.
func randomBatches(rng *rand.Rand, base int64) []*pb.StateBatch {
	states := []int32{0, 1, 2, 4}
	var out []*pb.StateBatch
	for range 1 + rng.IntN(5) {
		first := base + int64(rng.IntN(60))
		b := &pb.StateBatch{FirstOffset: first, LastOffset: first + int64(rng.IntN(12)),
			DeliveryState: states[rng.IntN(4)], DeliveryCount: int32(rng.IntN(5))}
		out = append(out, b)
		if rng.IntN(6) == 0 {
			out = append(out, proto.Clone(b).(*pb.StateBatch))
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (s *crashSuite) doWrite(ctx context.Context, client pb.ShareCoordinatorServiceClient, keys []*crashKey, rng *rand.Rand) bool {
	req := &pb.WriteShareGroupStateRequest{GroupId: keys[0].group}
	next := make([]keyState, len(keys))
	topics := map[string]*pb.WriteStateTopic{}
	for i, k := range keys {
		base := max(k.cur.start, 0)
		start := int64(-1)
		if rng.IntN(2) == 0 {
			start = base + int64(rng.IntN(8))
		}
		part := &pb.WriteStatePartition{Partition: k.partition, StateEpoch: k.maxState, LeaderEpoch: k.maxLeader,
			StartOffset: start, StateBatches: randomBatches(rng, base)}
		dcc := int32(-1)
		if rng.IntN(3) > 0 {
			dcc = int32(rng.IntN(40)) - 1
			part.DeliveryCompleteCount = proto.Int32(dcc)
		}
		next[i] = k.cur.written(start, dcc, part.StateBatches)
		t, ok := topics[k.topic]
		if !ok {
			t = &pb.WriteStateTopic{TopicId: k.topic}
			topics[k.topic] = t
			req.Topics = append(req.Topics, t)
		}
		t.Partitions = append(t.Partitions, part)
	}
	begin := time.Now().UnixNano()
	resp, err := client.WriteShareGroupState(ctx, req)
	for i, k := range keys {
		r := findResult(resp.GetResults(), k.topic, k.partition)
		if err == nil && r == nil {
			s.fail("%v: no result in the write response", k)
			return true
		}
		s.settle(k, fmt.Sprintf("write(%d keys)", len(keys)), begin, next[i], r.GetErrorCode(), r.GetErrorMessage(), err)
	}
	return err != nil
}

func (s *crashSuite) doRead(ctx context.Context, client pb.ShareCoordinatorServiceClient, k *crashKey, leaderEpoch int32) bool {
	k.maxLeader = max(k.maxLeader, leaderEpoch)
	begin := time.Now().UnixNano()
	resp, err := client.ReadShareGroupState(ctx, &pb.ReadShareGroupStateRequest{GroupId: k.group, Topics: []*pb.ReadStateTopic{{
		TopicId: k.topic, Partitions: []*pb.ReadStatePartition{{Partition: k.partition, LeaderEpoch: leaderEpoch}}}}})
	var r *pb.ReadStatePartitionResult
	if err == nil {
		r = resp.GetResults()[0].GetPartitions()[0]
		// The answer is the state before the claim: check it against the model.
		if r.GetErrorCode() == pb.ErrorCode_ERROR_CODE_NONE {
			want := k.cur
			if r.GetStateEpoch() != want.stateEpoch || r.GetStartOffset() != want.start || !sameBatches(r.GetStateBatches(), want.batches()) {
				s.fail("%v: Read during the round returned epoch %d start %d %v; the model has epoch %d start %d %v",
					k, r.GetStateEpoch(), r.GetStartOffset(), r.GetStateBatches(), want.stateEpoch, want.start, want.batches())
			}
			s.stats.add(func(st *crashStats) { st.liveChecks++ })
		}
	}
	s.settle(k, fmt.Sprintf("read(leader epoch %d)", leaderEpoch), begin, k.cur.read(leaderEpoch), r.GetErrorCode(), r.GetErrorMessage(), err)
	return err != nil
}

func (s *crashSuite) doSummary(ctx context.Context, client pb.ShareCoordinatorServiceClient, k *crashKey) bool {
	resp, err := client.ReadShareGroupStateSummary(ctx, &pb.ReadShareGroupStateSummaryRequest{GroupId: k.group, Topics: []*pb.ReadStateSummaryTopic{{
		TopicId: k.topic, Partitions: []*pb.ReadStateSummaryPartition{{Partition: k.partition}}}}})
	if err != nil {
		if !serverGone(err) {
			s.fail("%v: summary failed: %v", k, err)
		}
		return true
	}
	r := resp.GetResults()[0].GetPartitions()[0]
	if !definite(r.GetErrorCode()) {
		return false
	}
	if d := k.cur.mismatch(observed{summary: r}); d != "" {
		s.fail("%v: summary during the round: %s\noperations since the last verification: %v", k, d, k.history)
	}
	s.stats.add(func(st *crashStats) { st.liveChecks++ })
	return false
}

func (s *crashSuite) doDelete(ctx context.Context, client pb.ShareCoordinatorServiceClient, k *crashKey) bool {
	begin := time.Now().UnixNano()
	resp, err := client.DeleteShareGroupState(ctx, &pb.DeleteShareGroupStateRequest{GroupId: k.group, Topics: []*pb.DeleteStateTopic{{
		TopicId: k.topic, Partitions: []*pb.DeleteStatePartition{{Partition: k.partition}}}}})
	r := firstPartition(resp.GetResults())
	s.settle(k, "delete", begin, absent(), r.GetErrorCode(), r.GetErrorMessage(), err)
	return err != nil
}

func firstPartition(results []*pb.TopicResult) *pb.PartitionResult {
	if len(results) == 0 || len(results[0].GetPartitions()) == 0 {
		return nil
	}
	return results[0].GetPartitions()[0]
}

func findResult(results []*pb.TopicResult, topic string, partition int32) *pb.PartitionResult {
	for _, t := range results {
		if t.GetTopicId() != topic {
			continue
		}
		for _, p := range t.GetPartitions() {
			if p.GetPartition() == partition {
				return p
			}
		}
	}
	return nil
}

// configWorker alters group configs, one or two keys of a group at a time (applied together or
// not at all), sometimes validate-only, until the server goes away or an alter is undecided.
func (s *crashSuite) configWorker(ctx context.Context, client pb.ConfigServiceClient, rng *rand.Rand) {
	for ctx.Err() == nil && s.failed() == "" {
		first := s.configs[rng.IntN(len(s.configs))]
		keys := []*configKey{first}
		for _, c := range s.configs {
			if c.group == first.group && c != first && rng.IntN(3) == 0 {
				keys = append(keys, c)
				break
			}
		}
		res := &pb.AlterConfigsResource{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: first.group}
		next := make([]string, len(keys))
		for i, c := range keys {
			if rng.IntN(4) == 0 {
				res.Configs = append(res.Configs, &pb.AlterableConfig{Name: c.name, ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_DELETE})
				continue
			}
			next[i] = configValue(c.name, rng)
			res.Configs = append(res.Configs, &pb.AlterableConfig{Name: c.name, ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_SET, Value: proto.String(next[i])})
		}
		validateOnly := rng.IntN(8) == 0
		resp, err := client.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{res}, ValidateOnly: validateOnly})
		switch {
		case err != nil:
			if !serverGone(err) {
				s.fail("alter %s: %v", first.group, err)
			}
			if !validateOnly {
				for i, c := range keys {
					c.alt = &next[i]
				}
				s.stats.add(func(st *crashStats) { st.uncertain++ })
			}
			return
		case resp.GetResponses()[0].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE:
			r := resp.GetResponses()[0]
			s.fail("alter %s: %v %s", first.group, r.GetErrorCode(), r.GetErrorMessage())
			return
		}
		if !validateOnly {
			for i, c := range keys {
				c.cur = next[i]
			}
		}
		s.configPending++ // a validate-only alter is verified too: it must have changed nothing
		s.stats.add(func(st *crashStats) { st.acked++ })
	}
}

// configValue returns a random valid value for a group config (default broker bounds).
func configValue(name string, rng *rand.Rand) string {
	switch name {
	case "share.delivery.count.limit":
		return strconv.Itoa(2 + rng.IntN(9))
	case "share.record.lock.duration.ms":
		return strconv.Itoa(15000 + rng.IntN(45001))
	default:
		return strconv.Itoa(200 + rng.IntN(301))
	}
}

// verify reads every key and config from the restarted server p and resolves the undecided
// operations: each key must equal its model with every acknowledged operation, and the
// undecided one either entirely applied or not at all.
func (s *crashSuite) verify(p *proc, round int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, keys := range s.workers {
		for _, k := range keys {
			s.verifyKey(ctx, p, k, round)
		}
	}
	s.verifyConfigs(ctx, p, round)
}

func (s *crashSuite) verifyKey(ctx context.Context, p *proc, k *crashKey, round int) {
	sr, err := p.state.ReadShareGroupStateSummary(ctx, &pb.ReadShareGroupStateSummaryRequest{GroupId: k.group, Topics: []*pb.ReadStateSummaryTopic{{
		TopicId: k.topic, Partitions: []*pb.ReadStateSummaryPartition{{Partition: k.partition}}}}})
	if err != nil {
		s.fail("%v: summary after restart: %v", k, err)
		return
	}
	obs := observed{summary: sr.GetResults()[0].GetPartitions()[0]}
	candidates := []keyState{k.cur}
	if k.alt != nil {
		candidates = append(candidates, *k.alt)
	}
	anyExists := slices.ContainsFunc(candidates, func(c keyState) bool { return c.exists })
	if anyExists {
		// The read claims a leader epoch above any sent so far, so its effect does not depend on
		// the highest epoch the server remembers: that is rebuilt on load from the records still
		// in the log (as Kafka's ShareCoordinatorShard replays it), and pruning may have dropped a
		// claim older than the key's last initialization.
		k.maxLeader++
		rr, err := p.state.ReadShareGroupState(ctx, &pb.ReadShareGroupStateRequest{GroupId: k.group, Topics: []*pb.ReadStateTopic{{
			TopicId: k.topic, Partitions: []*pb.ReadStatePartition{{Partition: k.partition, LeaderEpoch: k.maxLeader}}}}})
		if err != nil {
			s.fail("%v: read after restart: %v", k, err)
			return
		}
		obs.read = rr.GetResults()[0].GetPartitions()[0]
	}
	var diffs []string
	matched := -1
	for i, c := range candidates {
		d := c.mismatch(obs)
		if d == "" {
			matched = i
			break
		}
		diffs = append(diffs, d)
	}
	if matched < 0 {
		s.stats.add(func(st *crashStats) { st.losses++ })
		s.fail("%v: after restart %d the state matches neither the acknowledged operations (%s) nor them plus the undecided one (%v)\noperations since the last verification: %v",
			k, round, diffs[0], diffs[1:], k.history)
		return
	}
	if k.alt != nil && matched == 1 {
		s.stats.add(func(st *crashStats) { st.uncertainApplied++ })
	}
	state := candidates[matched]
	if obs.read != nil {
		state = state.read(k.maxLeader) // the verification read claimed the epoch
	}
	n := k.pendingAck
	s.stats.add(func(st *crashStats) { st.verified += n })
	k.cur, k.alt, k.frozen, k.pendingAck, k.history = state, nil, false, 0, k.history[:0]
}

func (s *crashSuite) verifyConfigs(ctx context.Context, p *proc, round int) {
	byGroup := map[string][]*configKey{}
	var groups []string
	for _, c := range s.configs {
		if _, ok := byGroup[c.group]; !ok {
			groups = append(groups, c.group)
		}
		byGroup[c.group] = append(byGroup[c.group], c)
	}
	for _, g := range groups {
		keys := byGroup[g]
		names := make([]string, len(keys))
		for i, c := range keys {
			names[i] = c.name
		}
		resp, err := p.config.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{{
			ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: g, ConfigurationKeys: names}}})
		if err != nil {
			s.fail("describe %s after restart: %v", g, err)
			return
		}
		got := map[string]string{}
		for _, c := range resp.GetResults()[0].GetConfigs() {
			if c.GetConfigSource() == pb.ConfigSource_CONFIG_SOURCE_GROUP_CONFIG {
				got[c.GetName()] = c.GetValue()
			}
		}
		// The group's keys changed together: all acknowledged values, or (if an alter of the
		// group was undecided) all of its values.
		matchesCur, matchesAlt, hasAlt := true, true, false
		for _, c := range keys {
			matchesCur = matchesCur && got[c.name] == c.cur
			want := c.cur
			if c.alt != nil {
				want, hasAlt = *c.alt, true
			}
			matchesAlt = matchesAlt && got[c.name] == want
		}
		switch {
		case matchesCur:
		case hasAlt && matchesAlt:
			s.stats.add(func(st *crashStats) { st.uncertainApplied++ })
			for _, c := range keys {
				if c.alt != nil {
					c.cur = *c.alt
				}
			}
		default:
			s.stats.add(func(st *crashStats) { st.losses++ })
			want := map[string]string{}
			for _, c := range keys {
				want[c.name] = c.cur
			}
			s.fail("group %s after restart %d: configs %v, want %v (or with the undecided alter applied)", g, round, got, want)
			return
		}
		for _, c := range keys {
			c.alt = nil
		}
	}
	// Every alter acknowledged since the last verification is covered by the comparison above.
	n := s.configPending
	s.stats.add(func(st *crashStats) { st.verified += n })
	s.configPending = 0
}
