package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/client"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// workloadOptions shape a workload.
type workloadOptions struct {
	keys    int           // share partitions; 6 unless set
	workers int           // concurrent callers; 4 unless set
	pace    time.Duration // each worker starts at most one call per pace; 5 ms unless set
	// pinned makes worker i call key i mod keys only, so that calls stuck on a slow key cannot
	// hold every worker and starve the other keys: for tests that check each key's service.
	pinned bool
}

// workload is a concurrent load of the Go client on a few share partitions (keys) of one group
// and topic, partitions 0 to keys-1: each worker loops over random writes (60%) and reads of
// random keys. Every call goes into the history.
type workload struct {
	t     *testing.T
	cl    *client.Client
	opts  workloadOptions
	group string
	topic string
	hist  *history
	// next hands out each key's write offsets, in increasing order, so that every write of a key
	// is told apart from every other. A write of offset o moves the start offset to
	// o - startLag: the stored set of offsets then holds a few recent writes, and older ones
	// leave it, as a share-partition leader's acknowledged offsets do.
	next []atomic.Int64

	stop    chan struct{}
	workers sync.WaitGroup
	running atomic.Bool
	stats   stats
}

// loadFor lets the workload run for d. The wait is the point: load before, during or after a
// fault, not a condition to poll for.
func loadFor(d time.Duration) { time.Sleep(d) }

// startLag is how far a write's start offset trails its offset.
const startLag = 4

// stats count a workload's outcomes.
type stats struct {
	mu         sync.Mutex
	writesOK   int
	writesFail int
	readsOK    int
	readsFail  int
	failures   map[string]int // failed calls by what they returned
	retries    int            // retries of the client (Options.OnRetry)
	retryCodes map[string]int // retried partitions by their error code
}

func (s *stats) add(f func(*stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *stats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("writes acknowledged %d, failed %d; reads answered %d, failed %d; failures %v; client retries %d, retried partitions by code %v",
		s.writesOK, s.writesFail, s.readsOK, s.readsFail, s.failures, s.retries, s.retryCodes)
}

// newWorkload initializes the keys of a new workload on the cluster (state epoch 1, start
// offset 0) and returns it, not yet running.
func newWorkload(t *testing.T, c *cluster, opts workloadOptions) *workload {
	t.Helper()
	if opts.keys == 0 {
		opts.keys = 6
	}
	if opts.workers == 0 {
		opts.workers = 4
	}
	if opts.pace == 0 {
		opts.pace = 5 * time.Millisecond
	}
	w := &workload{t: t, opts: opts, group: "faults", topic: newTopicID(), next: make([]atomic.Int64, opts.keys),
		stop: make(chan struct{}), stats: stats{failures: map[string]int{}, retryCodes: map[string]int{}}}
	w.cl = c.newClient(w.onRetry)
	w.hist = &history{base: time.Now()}
	keys := make([]int, opts.keys)
	for k := range keys {
		keys[k] = k
	}
	w.initialize(keys)
	t.Cleanup(w.halt)
	return w
}

// initialize initializes keys (state epoch 1, start offset 0).
func (w *workload) initialize(keys []int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parts := make([]*pb.InitializeStatePartition, len(keys))
	for i, k := range keys {
		parts[i] = &pb.InitializeStatePartition{Partition: int32(k), StateEpoch: 1, StartOffset: 0}
	}
	// The client retries retriable errors (a cluster electing its first leaders) until ctx ends.
	resp, err := w.cl.InitializeShareGroupState(ctx, &pb.InitializeShareGroupStateRequest{GroupId: w.group,
		Topics: []*pb.InitializeStateTopic{{TopicId: w.topic, Partitions: parts}}})
	if err != nil {
		w.t.Fatalf("initialize keys %v: %v", keys, err)
	}
	for _, tr := range resp.GetResults() {
		for _, pr := range tr.GetPartitions() {
			if pr.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
				w.t.Fatalf("initialize key %d: %v %s", pr.GetPartition(), pr.GetErrorCode(), pr.GetErrorMessage())
			}
		}
	}
}

// sideKey initializes a key of the workload's group and topic outside its keys, whose state
// partition is part, and returns it: for calls a test checks by itself rather than through
// porcupine (see sideCalls).
func (w *workload) sideKey(part int) int {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	for i := range 200 {
		keys = append(keys, client.Key(w.group, w.topic, int32(w.opts.keys+i)))
	}
	resp, err := w.cl.FindCoordinator(ctx, keys)
	if err != nil {
		w.t.Fatalf("FindCoordinator: %v", err)
	}
	for i, co := range resp.GetCoordinators() {
		if int(co.GetStatePartition()) == part {
			k := w.opts.keys + i
			w.initialize([]int{k})
			return k
		}
	}
	w.t.Fatalf("none of %d keys maps to state partition %d", len(keys), part)
	return 0
}

// newTopicID returns a random topic id in Kafka's Uuid text form.
func newTopicID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (w *workload) onRetry(r client.Retry) {
	w.stats.add(func(s *stats) {
		s.retries++
		for code, n := range r.Codes {
			s.retryCodes[code.String()] += n
		}
	})
}

// run starts the workers.
func (w *workload) run() {
	w.running.Store(true)
	for i := range w.opts.workers {
		w.workers.Go(func() { w.worker(i) })
	}
}

func (w *workload) worker(id int) {
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), uint64(id)))
	pace := time.NewTicker(w.opts.pace)
	defer pace.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-pace.C:
		}
		k := rng.IntN(w.opts.keys)
		if w.opts.pinned {
			k = id % w.opts.keys
		}
		if rng.IntN(100) < 60 {
			w.write(id, k)
		} else {
			w.read(id, k)
		}
	}
}

// halt stops the workers and waits for their calls in flight.
func (w *workload) halt() {
	if w.running.Swap(false) {
		close(w.stop)
		w.workers.Wait()
	}
}

// writeRequest is a write of offset with start offset start to key k.
func (w *workload) writeRequest(k int, start, offset int64) *pb.WriteShareGroupStateRequest {
	return &pb.WriteShareGroupStateRequest{GroupId: w.group, Topics: []*pb.WriteStateTopic{{TopicId: w.topic,
		Partitions: []*pb.WriteStatePartition{{Partition: int32(k), StateEpoch: 1, LeaderEpoch: 0, StartOffset: start,
			StateBatches: []*pb.StateBatch{{FirstOffset: offset, LastOffset: offset, DeliveryState: 2, DeliveryCount: 1}}}}}}}
}

func (w *workload) readRequest(k int) *pb.ReadShareGroupStateRequest {
	return &pb.ReadShareGroupStateRequest{GroupId: w.group, Topics: []*pb.ReadStateTopic{{TopicId: w.topic,
		Partitions: []*pb.ReadStatePartition{{Partition: int32(k), LeaderEpoch: 0}}}}}
}

// nextWrite returns the input of the next write of key k.
func (w *workload) nextWrite(k int) opInput {
	o := w.next[k].Add(1)
	return opInput{kind: opWrite, key: k, start: max(0, o-startLag), offset: o}
}

// write makes one write of key k through the client and records it.
func (w *workload) write(clientID, k int) {
	in := w.nextWrite(k)
	call := w.hist.now()
	resp, err := w.cl.WriteShareGroupState(context.Background(), w.writeRequest(k, in.start, in.offset))
	w.recordWrite(clientID, in, call, w.hist.now(), writeOutcome(resp, err))
}

// recordWrite records a write that returned outcome ("" for success).
func (w *workload) recordWrite(clientID int, in opInput, call, ret int64, outcome string) {
	ok := outcome == ""
	w.hist.add(clientID, in, opOutput{ambiguous: !ok}, call, ret)
	w.stats.add(func(s *stats) {
		if ok {
			s.writesOK++
			return
		}
		s.writesFail++
		s.failures["write: "+outcome]++
	})
}

// writeOutcome is "" for a write answered with success, else what it returned.
func writeOutcome(resp *pb.WriteShareGroupStateResponse, err error) string {
	if err != nil {
		return "gRPC " + status.Code(err).String()
	}
	rs := resp.GetResults()
	if len(rs) != 1 || len(rs[0].GetPartitions()) != 1 {
		return fmt.Sprintf("not one result: %v", resp)
	}
	if c := rs[0].GetPartitions()[0].GetErrorCode(); c != pb.ErrorCode_ERROR_CODE_NONE {
		return c.String()
	}
	return ""
}

// read makes one read of key k through the client and records it if it succeeded.
func (w *workload) read(clientID, k int) {
	call := w.hist.now()
	resp, err := w.cl.ReadShareGroupState(context.Background(), w.readRequest(k))
	w.recordRead(clientID, k, call, w.hist.now(), resp, err)
}

// recordRead records a read that returned resp and err; one that failed is left out of the
// history (it observed nothing), and counted.
func (w *workload) recordRead(clientID, k int, call, ret int64, resp *pb.ReadShareGroupStateResponse, err error) (opOutput, bool) {
	out, outcome := readOutput(resp, err)
	w.stats.add(func(s *stats) {
		if outcome == "" {
			s.readsOK++
			return
		}
		s.readsFail++
		s.failures["read: "+outcome]++
	})
	if outcome != "" {
		return out, false
	}
	w.hist.add(clientID, opInput{kind: opRead, key: k}, out, call, ret)
	return out, true
}

// readOutput is what a read returned: the output, or why it failed.
func readOutput(resp *pb.ReadShareGroupStateResponse, err error) (opOutput, string) {
	if err != nil {
		return opOutput{}, "gRPC " + status.Code(err).String()
	}
	rs := resp.GetResults()
	if len(rs) != 1 || len(rs[0].GetPartitions()) != 1 {
		return opOutput{}, fmt.Sprintf("not one result: %v", resp)
	}
	pr := rs[0].GetPartitions()[0]
	if c := pr.GetErrorCode(); c != pb.ErrorCode_ERROR_CODE_NONE {
		return opOutput{}, c.String()
	}
	out := opOutput{start: pr.GetStartOffset()}
	for _, b := range pr.GetStateBatches() {
		if b.GetDeliveryState() != 2 || b.GetDeliveryCount() != 1 || b.GetFirstOffset() > b.GetLastOffset() ||
			b.GetLastOffset()-b.GetFirstOffset() > 1<<20 {
			out.odd = fmt.Sprintf("a batch the workload never wrote: %v", b)
			break
		}
		for o := b.GetFirstOffset(); o <= b.GetLastOffset(); o++ {
			out.offsets = append(out.offsets, o)
		}
	}
	slices.Sort(out.offsets)
	return out, ""
}

// finish stops the workload, reads every key once more through the client and checks the
// history: linearizable, and every acknowledged write still there (or below the final start
// offset).
func (w *workload) finish() {
	w.t.Helper()
	w.halt()
	final := make([]opOutput, w.opts.keys)
	for k := range w.opts.keys {
		final[k] = w.readUntilOK(k, true)
	}
	w.t.Logf("workload: %d operations, the slowest answered %s; %v", w.hist.len(), w.hist.slowest(), &w.stats)
	w.checkLinearizable()
	w.checkReadBack(final)
}

// readUntilOK reads key k through the client until a read succeeds (a minute at most), recording
// the reads in the history if record.
func (w *workload) readUntilOK(k int, record bool) opOutput {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		call := w.hist.now()
		resp, err := w.cl.ReadShareGroupState(context.Background(), w.readRequest(k))
		if !record {
			if out, outcome := readOutput(resp, err); outcome == "" {
				return out
			}
		} else if out, ok := w.recordRead(-1, k, call, w.hist.now(), resp, err); ok {
			return out
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("key %d: no read succeeded within a minute: %v %v", k, resp, err)
		}
	}
}

// checkLinearizable checks the history with porcupine; a history that is not linearizable fails
// the test, its visualization written to the test's output directory.
func (w *workload) checkLinearizable() {
	w.t.Helper()
	ops := w.hist.operations()
	began := time.Now()
	res := porcupine.CheckOperationsTimeout(shareStateModel, ops, 3*time.Minute)
	w.t.Logf("porcupine: %s for %d operations in %v", res, len(ops), time.Since(began).Round(time.Millisecond))
	if res == porcupine.Ok {
		return
	}
	// Again, keeping what the visualization shows: the partial linearizations.
	res, info := porcupine.CheckOperationsVerbose(shareStateModel, ops, 3*time.Minute)
	if res == porcupine.Ok {
		return // the first check ran out of time, this one did not
	}
	path := "(not written)"
	if dir := outputDir(w.t); dir != "" {
		path = filepath.Join(dir, "linearizability.html")
		if err := porcupine.VisualizePath(shareStateModel, info, path); err != nil {
			w.t.Logf("write the porcupine visualization: %v", err)
		}
	}
	if res == porcupine.Illegal {
		w.t.Errorf("the history is not linearizable; porcupine's visualization: %s", path)
		return
	}
	w.t.Errorf("porcupine could not decide within 3 minutes whether the history is linearizable (%s); visualization: %s", res, path)
}

// checkReadBack checks that the final state of each key holds every offset an acknowledged
// write of it wrote, unless the start offset moved past it.
func (w *workload) checkReadBack(final []opOutput) {
	w.t.Helper()
	lost := map[int][]int64{}
	for _, in := range w.hist.acknowledged() {
		f := final[in.key]
		if _, found := slices.BinarySearch(f.offsets, in.offset); !found && in.offset >= f.start {
			lost[in.key] = append(lost[in.key], in.offset)
		}
	}
	for k, offs := range lost {
		w.t.Errorf("key %d: acknowledged writes lost: offsets %v are neither in the final state (start %d, %s) nor below its start offset",
			k, offs, final[k].start, offsetList(final[k].offsets))
	}
}

// history is the record of a test's calls, for porcupine: call and return times are
// nanoseconds since the workload began, on the monotonic clock.
type history struct {
	base time.Time

	mu    sync.Mutex
	ops   []porcupine.Operation
	acked []opInput // writes answered with success
}

func (h *history) now() int64 { return int64(time.Since(h.base)) }

// add records a call; an ambiguous write returns "never".
func (h *history) add(clientID int, in opInput, out opOutput, call, ret int64) {
	if out.ambiguous {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: clientID + 1, Input: in, Output: out, Call: call, Return: ret})
	if in.kind == opWrite && !out.ambiguous {
		h.acked = append(h.acked, in)
	}
}

// slowest describes the answered call that took longest.
func (h *history) slowest() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var worst *porcupine.Operation
	for i := range h.ops {
		op := &h.ops[i]
		if op.Return != math.MaxInt64 && (worst == nil || op.Return-op.Call > worst.Return-worst.Call) {
			worst = op
		}
	}
	if worst == nil {
		return "none"
	}
	return fmt.Sprintf("in %v (%s, called at %v)", time.Duration(worst.Return-worst.Call).Round(time.Millisecond),
		shareStateModel.DescribeOperation(worst.Input, worst.Output), time.Duration(worst.Call).Round(time.Millisecond))
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

func (h *history) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

func (h *history) acknowledged() []opInput {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.acked)
}

// served returns, for each key, how many of its calls were invoked at or after from and
// answered with success by until (history times).
func (h *history) served(from, until int64) map[int]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int]int{}
	for _, op := range h.ops {
		if op.Call >= from && op.Return <= until {
			out[op.Input.(opInput).key]++
		}
	}
	return out
}

// requireServed fails the test unless every key had a call invoked at or after from and
// answered with success by until: the cluster served all of them meanwhile.
func (w *workload) requireServed(from, until int64, what string) {
	w.t.Helper()
	served := w.hist.served(from, until)
	var missing []string
	for k := range w.opts.keys {
		if served[k] == 0 {
			missing = append(missing, fmt.Sprint(k))
		}
	}
	if len(missing) > 0 {
		counts := make([]string, 0, len(served))
		for k, n := range served {
			counts = append(counts, fmt.Sprintf("key %d: %d", k, n))
		}
		sort.Strings(counts)
		w.t.Errorf("%s: no call of keys %s succeeded between %v and %v (served: %s; %v)", what, strings.Join(missing, ", "),
			time.Duration(from), time.Duration(until), strings.Join(counts, ", "), &w.stats)
	}
}

// directCall is a call sent to one node by a plain gRPC stub: no lookup, no retry.
type directCall struct {
	in      opInput
	call    int64     // history time of the call
	ret     int64     // history time of the answer
	retWall time.Time // wall-clock time of the answer, to compare with the server's log
	outcome string    // "" for success
}

// sendWrite sends the write in through stub: one node, no lookup, no retry. It records nothing.
func (w *workload) sendWrite(ctx context.Context, stub pb.ShareCoordinatorServiceClient, in opInput) directCall {
	call := w.hist.now()
	resp, err := stub.WriteShareGroupState(ctx, w.writeRequest(in.key, in.start, in.offset))
	return directCall{in: in, call: call, ret: w.hist.now(), retWall: time.Now(), outcome: writeOutcome(resp, err)}
}

// sendRead reads key k through stub, recording nothing.
func (w *workload) sendRead(ctx context.Context, stub pb.ShareCoordinatorServiceClient, k int) (directCall, opOutput) {
	in := opInput{kind: opRead, key: k}
	call := w.hist.now()
	resp, err := stub.ReadShareGroupState(ctx, w.readRequest(k))
	d := directCall{in: in, call: call, ret: w.hist.now(), retWall: time.Now()}
	out, outcome := readOutput(resp, err)
	d.outcome = outcome
	return d, out
}

// directWrite writes the next offset of key k through stub and records it in the history (not in
// the workload's counts: a node that does not lead the key refuses it, as it should).
func (w *workload) directWrite(ctx context.Context, stub pb.ShareCoordinatorServiceClient, clientID, k int) directCall {
	d := w.sendWrite(ctx, stub, w.nextWrite(k))
	w.hist.add(clientID, d.in, opOutput{ambiguous: d.outcome != ""}, d.call, d.ret)
	return d
}

// directRead reads key k through stub and records it in the history if it succeeded.
func (w *workload) directRead(ctx context.Context, stub pb.ShareCoordinatorServiceClient, clientID, k int) directCall {
	d, out := w.sendRead(ctx, stub, k)
	if d.outcome == "" {
		w.hist.add(clientID, d.in, out, d.call, d.ret)
	}
	return d
}

// checkSide checks side key k (see sideKey), whose only writes were calls, each of an offset of
// its own with start offset 0, and which nothing read until now: read through the client, it
// must still start at 0, hold every offset a call was acknowledged for and none that no call
// wrote. This is what linearizability comes to for such a key; porcupine would search every
// subset of the failed writes for the one applied.
func (w *workload) checkSide(k int, calls []directCall) {
	w.t.Helper()
	final := w.readUntilOK(k, false)
	sent, acked := map[int64]bool{}, 0
	for _, d := range calls {
		if d.in.kind != opWrite {
			continue
		}
		sent[d.in.offset] = true
		if d.outcome == "" {
			acked++
		}
		if _, found := slices.BinarySearch(final.offsets, d.in.offset); d.outcome == "" && !found {
			w.t.Errorf("key %d: acknowledged write of offset %d lost: the key holds %s", k, d.in.offset, offsetList(final.offsets))
		}
	}
	for _, o := range final.offsets {
		if !sent[o] {
			w.t.Errorf("key %d holds offset %d, which no write sent", k, o)
		}
	}
	if final.start != 0 || final.odd != "" {
		w.t.Errorf("key %d: start offset %d (%s), want 0 and only the writes sent", k, final.start, final.odd)
	}
	w.t.Logf("key %d: %d writes sent to one node, %d acknowledged; the key holds %d of them (a write that failed may still be applied)",
		k, len(sent), acked, len(final.offsets))
}
