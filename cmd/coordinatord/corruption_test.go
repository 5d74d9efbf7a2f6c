package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// statePartitionOf returns the state partition, out of n, that group's key (topicA, partition 0)
// routes to.
func statePartitionOf(group string, n int) int {
	id, err := record.ParseTopicID(topicA)
	if err != nil {
		panic(err)
	}
	return shard.PartitionFor(shard.Key{GroupID: group, TopicID: id}.CoordinatorKey(), n)
}

// groupOn returns a group id, prefix followed by a number, whose key (topicA, partition 0) routes
// to state partition target of n.
func groupOn(prefix string, target, n int) string {
	for i := 0; ; i++ {
		if g := prefix + strconv.Itoa(i); statePartitionOf(g, n) == target {
			return g
		}
	}
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// dirDigest hashes every file of dir (names and contents), to show that nothing changed.
func dirDigest(t *testing.T, dir string) [32]byte {
	t.Helper()
	h := sha256.New()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(e.Name()))
		h.Write(data)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// TestCorruptedSegment flips one byte inside a segment that is not the newest of one state
// partition. That partition refuses to load, naming the file and byte offset (log, /readyz,
// per-key errors, sharecoord_partition_status), while every other partition serves. repair-log
// reports without --yes and changes nothing; with --yes it truncates at the corruption point and
// says what it dropped, after which the partition serves again.
func TestCorruptedSegment(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	const partitions, victim = 4, 2
	args := []string{
		"--override", "share.coordinator.state.topic.num.partitions=" + strconv.Itoa(partitions),
		"--override", "share.coordinator.state.topic.segment.bytes=1048576",
	}
	dir := t.TempDir()
	p := startProc(t, dir, args...)
	ctx := ctxT(t)

	victimGroup := groupOn("victim-", victim, partitions)
	var others []string
	for sp := range partitions {
		if sp != victim {
			others = append(others, groupOn("other-"+strconv.Itoa(sp)+"-", sp, partitions))
		}
	}
	for _, g := range append([]string{victimGroup}, others...) {
		mustInitialize(ctx, t, p, g, topicA, 0, 1)
	}
	// About 4 KiB per record: enough writes to fill more than two 1 MiB segments.
	var batches []*pb.StateBatch
	for i := range int64(200) {
		batches = append(batches, &pb.StateBatch{FirstOffset: 2 * i, LastOffset: 2 * i, DeliveryState: int32(i%2) * 2, DeliveryCount: 1})
	}
	var eg errgroup.Group
	eg.SetLimit(16)
	for range 700 {
		eg.Go(func() error {
			resp, err := p.state.WriteShareGroupState(ctx, writeReq(victimGroup, topicA, 0, -1, batches...))
			if err != nil {
				return err
			}
			r := resp.GetResults()[0].GetPartitions()[0]
			mustOK(t, "write", r.GetErrorCode(), r.GetErrorMessage())
			return nil
		})
	}
	for _, g := range others {
		eg.Go(func() error {
			resp, err := p.state.WriteShareGroupState(ctx, writeReq(g, topicA, 0, 3, &pb.StateBatch{FirstOffset: 3, LastOffset: 9, DeliveryState: 2, DeliveryCount: 1}))
			if err != nil {
				return err
			}
			r := resp.GetResults()[0].GetPartitions()[0]
			mustOK(t, "write "+g, r.GetErrorCode(), r.GetErrorMessage())
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
	before := map[string]*pb.ReadStatePartitionResult{}
	for _, g := range others {
		rr, err := p.state.ReadShareGroupState(ctx, readReq(g, topicA, 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		before[g] = rr.GetResults()[0].GetPartitions()[0]
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p.log())
	}

	// Flip a byte in the middle of the oldest segment of the victim partition.
	victimDir := datadir.PartitionDir(dir, victim)
	segs, err := filepath.Glob(filepath.Join(victimDir, "*.seg"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("want at least two segments in %s, got %v (%v)", victimDir, segs, err)
	}
	damaged := segs[0]
	data, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(damaged, data, 0o644); err != nil {
		t.Fatal(err)
	}

	p = startProc(t, dir, args...)
	// The log names the partition, the file and the byte offset.
	atByte := regexp.MustCompile(regexp.QuoteMeta(damaged) + ` at byte \d+`)
	_, logged := p.waitLine(func(line string) bool {
		var e struct {
			Msg       string `json:"msg"`
			Partition *int   `json:"state_partition"`
			Error     string `json:"error"`
		}
		return json.Unmarshal([]byte(line), &e) == nil && e.Partition != nil && *e.Partition == victim &&
			strings.Contains(e.Msg, "failed to load") && atByte.MatchString(e.Error)
	})
	if !logged {
		t.Fatalf("no log line says partition %d failed to load naming %s and the byte offset\n%s", victim, damaged, p.log())
	}

	// The victim's keys answer COORDINATOR_NOT_AVAILABLE with the kind of failure, for every
	// operation; file names and offsets stay in the server log and /readyz.
	notAvailable := func(what string, code pb.ErrorCode, msg string) {
		t.Helper()
		if code != pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE || !strings.Contains(msg, "state log is damaged") ||
			strings.Contains(msg, dir) || strings.Contains(msg, filepath.Base(damaged)) {
			t.Fatalf("%s on the corrupted partition: %v %q, want COORDINATOR_NOT_AVAILABLE saying the log is damaged, naming no file", what, code, msg)
		}
	}
	rr, err := p.state.ReadShareGroupState(ctx, readReq(victimGroup, topicA, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	notAvailable("read", rr.GetResults()[0].GetPartitions()[0].GetErrorCode(), rr.GetResults()[0].GetPartitions()[0].GetErrorMessage())
	wr, err := p.state.WriteShareGroupState(ctx, writeReq(victimGroup, topicA, 0, -1, batches[0]))
	if err != nil {
		t.Fatal(err)
	}
	notAvailable("write", wr.GetResults()[0].GetPartitions()[0].GetErrorCode(), wr.GetResults()[0].GetPartitions()[0].GetErrorMessage())
	ir, err := p.state.InitializeShareGroupState(ctx, initReq(victimGroup, topicA, 0, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	notAvailable("initialize", ir.GetResults()[0].GetPartitions()[0].GetErrorCode(), ir.GetResults()[0].GetPartitions()[0].GetErrorMessage())

	// /readyz is 503 and names the partition and the damage; the status metric says failed.
	client := &http.Client{}
	code, body := httpGet(t, client, "http://"+p.metricsAddr+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "partition "+strconv.Itoa(victim)+": failed") || !atByte.MatchString(body) {
		t.Fatalf("/readyz = %d %q, want 503 naming partition %d and %s", code, body, victim, damaged)
	}
	// Excluding failed partitions, the server is ready: every partition has finished loading.
	if code, body := httpGet(t, client, "http://"+p.metricsAddr+"/readyz?exclude=failed"); code != http.StatusOK ||
		!strings.Contains(body, "partition "+strconv.Itoa(victim)+": failed") {
		t.Fatalf("/readyz?exclude=failed = %d %q, want 200 still listing partition %d as failed", code, body, victim)
	}
	_, metrics := httpGet(t, client, "http://"+p.metricsAddr+"/metrics")
	for sp := range partitions {
		status := "active"
		if sp == victim {
			status = "failed"
		}
		series := `sharecoord_partition_status{partition="` + strconv.Itoa(sp) + `",status="` + status + `"} 1`
		if !strings.Contains(metrics, series) {
			t.Fatalf("/metrics lacks %s", series)
		}
	}

	// Every other partition serves: same state as before, and new writes succeed.
	for _, g := range others {
		rr, err := p.state.ReadShareGroupState(ctx, readReq(g, topicA, 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		if got := rr.GetResults()[0].GetPartitions()[0]; !proto.Equal(got, before[g]) {
			t.Fatalf("%s after the restart: %v, want %v", g, got, before[g])
		}
		wr, err := p.state.WriteShareGroupState(ctx, writeReq(g, topicA, 0, -1, &pb.StateBatch{FirstOffset: 10, LastOffset: 12, DeliveryState: 2, DeliveryCount: 1}))
		if err != nil {
			t.Fatal(err)
		}
		r := wr.GetResults()[0].GetPartitions()[0]
		mustOK(t, "write "+g+" next to the corrupted partition", r.GetErrorCode(), r.GetErrorMessage())
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p.log())
	}

	// repair-log without --yes only reports.
	digest := dirDigest(t, victimDir)
	out, stderr, exit := runTool(t, "repair-log", victimDir)
	if exit != exitFailure || !atByte.MatchString(out) || !strings.Contains(out, "--yes") ||
		!strings.Contains(out, "a repair would truncate "+damaged) || strings.Count(out, "a repair would delete ") != 2 ||
		!regexp.MustCompile(`\nafter a repair the log holds the records from offset \d+ up to \d+\n`).MatchString(out) {
		t.Fatalf("repair-log without --yes: exit %d, want the corruption point and the 2 later segments a repair would delete\n%s\n%s", exit, out, stderr)
	}
	if dirDigest(t, victimDir) != digest {
		t.Fatal("repair-log without --yes changed the log")
	}
	t.Logf("repair-log without --yes:\n%s", out)
	// With --yes it truncates at the corruption point and says what it dropped.
	out, stderr, exit = runTool(t, "repair-log", "--yes", victimDir)
	if exit != 0 || !strings.Contains(out, "truncated "+damaged) || !regexp.MustCompile(`dropped \d+ bytes: every record from offset (\d+) on is gone(?s:.*)\nafter the repair the log holds the records from offset \d+ up to (\d+)\n`).MatchString(out) {
		t.Fatalf("repair-log --yes: exit %d\n%s\n%s", exit, out, stderr)
	}
	t.Logf("repair-log --yes:\n%s", out)
	// Its log says the same, and nothing else goes wrong on the way.
	if !strings.Contains(stderr, "repaired state log") || strings.Contains(stderr, "failed to") {
		t.Fatalf("repair-log --yes logged:\n%s\nwant the repair's warning and no internal error", stderr)
	}
	if bytes.Equal(mustRead(t, damaged), data) {
		t.Fatal("repair-log --yes left the damaged segment as it was")
	}

	// The partition serves again.
	p = startProc(t, dir, args...)
	if code, body := httpGet(t, client, "http://"+p.metricsAddr+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after the repair = %d %q", code, body)
	}
	mustInitialize(ctx, t, p, victimGroup, topicA, 0, 2)
	wr, err = p.state.WriteShareGroupState(ctx, &pb.WriteShareGroupStateRequest{GroupId: victimGroup, Topics: []*pb.WriteStateTopic{{
		TopicId: topicA, Partitions: []*pb.WriteStatePartition{{Partition: 0, StateEpoch: 2, LeaderEpoch: 1, StartOffset: -1, StateBatches: batches[:3]}}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := wr.GetResults()[0].GetPartitions()[0]
	mustOK(t, "write after the repair", r.GetErrorCode(), r.GetErrorMessage())
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestToolsRefuseWhatIsNotALog: dump-log on a directory without a state log (the config store's,
// an empty one) or a file that is not a segment, and repair-log on anything but one partition's
// log directory (the data directory, an empty one), say so and exit 2, changing nothing.
func TestToolsRefuseWhatIsNotALog(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir)
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p.log())
	}
	for _, d := range []string{filepath.Join(dir, "config"), t.TempDir()} {
		out, stderr, code := runTool(t, "dump-log", d)
		if code != exitBadConfig || out != "" || !strings.Contains(stderr, d+" holds no state log") {
			t.Errorf("dump-log %s: exit %d, stdout %q, stderr %q; want exit %d saying it holds no state log", d, code, out, stderr, exitBadConfig)
		}
	}
	if out, stderr, code := runTool(t, "dump-log", filepath.Join(dir, "config", "store")); code != exitBadConfig || out != "" ||
		!strings.Contains(stderr, "is not a segment file") {
		t.Errorf("dump-log on the config store: exit %d, stdout %q, stderr %q; want exit 2 saying it is not a segment file", code, out, stderr)
	}
	names := func(d string) string {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, e := range entries {
			s = append(s, e.Name())
		}
		return strings.Join(s, " ")
	}
	for _, d := range []string{dir, t.TempDir()} {
		before := names(d)
		out, stderr, code := runTool(t, "repair-log", "--yes", d)
		if code != exitBadConfig || !strings.Contains(stderr, d+" holds no state log") {
			t.Errorf("repair-log --yes %s: exit %d, stdout %q, stderr %q; want exit 2 saying it holds no state log", d, code, out, stderr)
		}
		if after := names(d); after != before {
			t.Errorf("repair-log --yes %s changed the directory: %q, was %q", d, after, before)
		}
	}
	// A partition log directory and the data directory itself still dump, the latter also with
	// a partition directory whose log was never started (no records, nothing to refuse).
	for _, d := range []string{datadir.PartitionDir(dir, 0), dir} {
		if _, stderr, code := runTool(t, "dump-log", d); code != 0 {
			t.Errorf("dump-log %s: exit %d\n%s", d, code, stderr)
		}
	}
	want, _, _ := runTool(t, "dump-log", dir)
	if err := os.Mkdir(datadir.PartitionDir(dir, 99), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runTool(t, "dump-log", dir); code != 0 || out != want {
		t.Errorf("dump-log %s with an empty partition directory: exit %d, %d bytes of output (%d without it)\n%s", dir, code, len(out), len(want), stderr)
	}
	// A misnamed segment file alone is a damaged log, as the server finds it, not an absent one.
	if err := os.WriteFile(filepath.Join(datadir.PartitionDir(dir, 99), "junk.seg"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runTool(t, "dump-log", dir); code != exitFailure || !strings.Contains(stderr, "unrecognised segment file name") {
		t.Errorf("dump-log %s with a lone misnamed segment: exit %d, want %d naming the damage\n%s", dir, code, exitFailure, stderr)
	}
}

// TestRepairLogReportsTornTail: damage to the last append of a log whose server was killed is a
// torn tail, which the server truncates on start; repair-log says so before and after doing it,
// with what it drops, instead of "no corruption found". After a clean stop the same damage is
// corruption: the log ended at a known offset, and records before it are damaged.
func TestRepairLogReportsTornTail(t *testing.T) {
	for _, stop := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(stop.String(), func(t *testing.T) {
			logDir, newest, data := damagedLastAppend(t, stop)
			out, stderr, code := runTool(t, "repair-log", logDir)
			if stop == syscall.SIGTERM {
				if code != exitFailure || !strings.Contains(out, "corruption: ") || !strings.Contains(out, "where it ended when it was last closed (clean-end)") ||
					strings.Contains(out, "torn tail") {
					t.Fatalf("repair-log (dry run) on damage after a clean stop: exit %d, want the corruption reported against clean-end\n%s\n%s", code, out, stderr)
				}
			} else if code != exitFailure || !strings.Contains(out, "torn tail: "+newest) || !strings.Contains(out, "a repair would truncate the torn tail") {
				t.Fatalf("repair-log (dry run) on a torn tail: exit %d\n%s\n%s", code, out, stderr)
			}
			if !bytes.Equal(mustRead(t, newest), data) {
				t.Fatal("the dry run changed the segment")
			}
			out, stderr, code = runTool(t, "repair-log", "--yes", logDir)
			want := "truncated the torn tail"
			if stop == syscall.SIGTERM {
				want = "truncated " + newest
			}
			if code != 0 || !strings.Contains(out, want) {
				t.Fatalf("repair-log --yes: exit %d, want %q\n%s\n%s", code, want, out, stderr)
			}
			if got := mustRead(t, newest); len(got) >= len(data) {
				t.Fatalf("the segment was not truncated: %d bytes, was %d", len(got), len(data))
			}
		})
	}
}

// damagedLastAppend acknowledges one write on a server with one state partition, stops the server
// with sig, and flips a byte inside the last append of its log. It returns the log's directory,
// its newest segment and that segment's damaged bytes. The server syncs its log at each append
// (state.log.sync=file): with the journal, a killed server's log need not hold its last
// appends, which only the journal does until the next start.
func damagedLastAppend(t *testing.T, sig syscall.Signal) (logDir, newest string, data []byte) {
	t.Helper()
	dir := t.TempDir()
	p := startProc(t, dir, "--override", "share.coordinator.state.topic.num.partitions=1", "--override", "state.log.sync=file")
	ctx := ctxT(t)
	mustInitialize(ctx, t, p, "g", topicA, 0, 1)
	resp, err := p.state.WriteShareGroupState(ctx, writeReq("g", topicA, 0, 0, &pb.StateBatch{FirstOffset: 0, LastOffset: 9, DeliveryState: 2, DeliveryCount: 1}))
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, "write", resp.GetResults()[0].GetPartitions()[0].GetErrorCode(), resp.GetResults()[0].GetPartitions()[0].GetErrorMessage())
	if code := p.stop(sig); sig == syscall.SIGTERM && code != 0 {
		t.Fatalf("exit status %d", code)
	}
	logDir = datadir.PartitionDir(dir, 0)
	segs, err := filepath.Glob(filepath.Join(logDir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	newest = segs[len(segs)-1]
	data = mustRead(t, newest)
	data[len(data)-3] ^= 0xff // inside the payload of the last frame
	if err := os.WriteFile(newest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return logDir, newest, data
}

// repair-log spells out a repair that leaves the log without a record: every share partition's
// state in that state partition is gone, which the offsets alone do not make plain.
func TestPrintRepairOfAnEmptiedLog(t *testing.T) {
	report := statelog.RepairReport{
		Corruptions:      []*statelog.CorruptionError{{Segment: "s.seg", Offset: 92, Reason: "payload checksum mismatch"}},
		StartOffsetReset: true, OldStartOffset: 40, NewStartOffset: 20, StartOffset: 20, EndOffset: 20,
	}
	for dryRun, want := range map[bool]string{
		true:  "after a repair the log holds no records (its offsets start and end at 20): the state of every share partition in it is gone\n",
		false: "after the repair the log holds no records (its offsets start and end at 20): the state of every share partition in it is gone\n",
	} {
		var out strings.Builder
		printRepair(&out, report, dryRun)
		if !strings.HasSuffix(out.String(), "\n"+want) {
			t.Errorf("dry run %v printed:\n%s\nwant it to end with %q", dryRun, out.String(), want)
		}
	}
}

// TestDumpLogWarnsOfTheJournal: dump-log of the data of a server killed with appends in its
// journal only says so on stderr, and prints them once a start has appended them to the logs; a
// clean stop leaves nothing to warn of.
func TestDumpLogWarnsOfTheJournal(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustInitialize(ctx, t, p, "journaled", topicA, 0, 1)
	p.kill()
	out, stderr, code := runTool(t, "dump-log", dir)
	if code != 0 || !strings.Contains(stderr, "batches past its last checkpoint") {
		t.Fatalf("dump-log after a kill: exit %d, stderr %q; want a warning that the journal holds appends", code, stderr)
	}
	if strings.Contains(out, `"group":"journaled"`) {
		t.Logf("the killed server's log held the record already (its page cache survived the kill): %s", out)
	}
	p = startProc(t, dir)
	p.stop(syscall.SIGTERM)
	out, stderr, code = runTool(t, "dump-log", dir)
	if code != 0 || stderr != "" || !strings.Contains(out, `"group":"journaled"`) {
		t.Fatalf("dump-log after a restart and a clean stop: exit %d, stderr %q, stdout %q; want the record and no warning", code, stderr, out)
	}
}
