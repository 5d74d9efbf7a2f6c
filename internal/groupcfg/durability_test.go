package groupcfg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

const crashChildEnv = "GROUPCFG_CRASH_CHILD_DIR"

// generationValues is what one update of the crash workloads sets: every value carries i, in
// two keys of one group and one key of another, so that a mix of two updates is visible.
func generationUpdate(i int) []AlterResource {
	return []AlterResource{
		groupRes("g1", set(keyDeadLetterTopicName, fmt.Sprintf("t-%d", i)), set(keyAutoOffsetReset, fmt.Sprintf("by_duration:PT%dS", i))),
		groupRes("g2", set(keyDeadLetterTopicName, fmt.Sprintf("t-%d", i))),
	}
}

// generationOf returns the update the Manager's values come from (0: none), or an error if the
// values mix updates.
func generationOf(m *Manager) (int, error) {
	g1 := m.groupText("g1", keyDeadLetterTopicName)
	reset := m.groupText("g1", keyAutoOffsetReset)
	g2 := m.groupText("g2", keyDeadLetterTopicName)
	if g1 == "" && g2 == "" && reset == "latest" {
		return 0, nil
	}
	i, err := strconv.Atoi(strings.TrimPrefix(g1, "t-"))
	if err != nil || reset != fmt.Sprintf("by_duration:PT%dS", i) || g2 != g1 {
		return 0, fmt.Errorf("values mix updates: g1 %s=%q %s=%q, g2 %s=%q",
			keyDeadLetterTopicName, g1, keyAutoOffsetReset, reset, keyDeadLetterTopicName, g2)
	}
	return i, nil
}

// runCrashChild is the child process of TestKillDuringUpdates: it applies updates to the store
// in dir forever, printing "acked N" after update N is acknowledged, until it is killed.
func runCrashChild(dir string) int {
	st, err := LoadStatic(Sources{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	m, err := Open(zap.NewNop(), storePath(dir), st, nil, Options{NodeID: 1})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	start, err := generationOf(m)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for i := start + 1; ; i++ {
		for _, res := range m.IncrementalAlterConfigs(context.Background(), generationUpdate(i), false) {
			if res.ErrorCode != kafkaerr.None {
				fmt.Println("error", res.ErrorMessage)
				return 1
			}
		}
		fmt.Printf("acked %d\n", i)
	}
}

// TestKillDuringUpdates kills (SIGKILL) a process while it keeps updating the store, at a random
// moment, and checks that a reopen finds the last acknowledged update or the one in flight,
// never a mix of two, never less.
func TestKillDuringUpdates(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		scanner := bufio.NewScanner(out)
		lastAcked, acks, killAfter := -1, 0, 5+rng.IntN(40)
		killed := false
		for scanner.Scan() {
			line := scanner.Text()
			n, ok := strings.CutPrefix(line, "acked ")
			if !ok {
				t.Fatalf("round %d: child: %s", round, line)
			}
			if lastAcked, err = strconv.Atoi(n); err != nil {
				t.Fatalf("round %d: child printed %q", round, line)
			}
			if acks++; acks == killAfter && !killed {
				// Acks printed between here and the kill still count: keep reading to EOF.
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !killed || !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child was not killed as planned: killed=%v, wait: %v", round, killed, err)
		}

		f := openFixture(t, dir, staticOf(t))
		got, err := generationOf(f.m)
		if err != nil {
			t.Fatalf("round %d after kill: %v", round, err)
		}
		if got != lastAcked && got != lastAcked+1 {
			t.Fatalf("round %d: reopen finds update %d; last acknowledged %d (so %d or %d expected)",
				round, got, lastAcked, lastAcked, lastAcked+1)
		}
		if err := f.m.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after ack %d, reopen finds %d", round, lastAcked, got)
	}
}

// newDataFS returns an in-memory file system holding the directory /data, durably: the data
// directory is its owner's, created before the store is opened in it.
func newDataFS(t *testing.T) *faultfs.CrashFS {
	t.Helper()
	mem := faultfs.NewCrashFS()
	if err := mem.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return mem
}

// dieAt fails the n-th operation (counting from 1) it is consulted about and every later one, as
// if the process had died there.
func dieAt(n int64) faultfs.Injector {
	var seen atomic.Int64
	return faultfs.InjectorFunc(func(faultfs.Op) error {
		if seen.Add(1) >= n {
			return syscall.EIO
		}
		return nil
	})
}

// TestCrashAtEveryStep fails the store at every filesystem operation of an update in turn, as a
// crash there would (the process dies: nothing after the fault happens), both for an update that
// appends a change record and for one that rewrites the store file. Reopening, both as after a
// process crash (page cache kept) and as after a power cut (only synced data kept, and with torn
// unsynced writes), finds the old or the new update, never a mix or nothing; an acknowledged
// update is always found.
func TestCrashAtEveryStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"append", Options{NodeID: 1}},
		{"rewrite", rewriting},
	} {
		t.Run("update="+tc.name, func(t *testing.T) { crashAtEveryStep(t, tc.opts) })
	}
}

func crashAtEveryStep(t *testing.T, opts Options) {
	st := staticOf(t)
	rng := rand.New(rand.NewPCG(3, 4))
	sawAck, sawFailure := false, false
	for step := int64(1); ; step++ {
		mem := newDataFS(t)
		fsys := faultfs.Wrap(mem, nil)
		f, err := tryOpenWith(t, "/data", st, fsys, opts)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		for _, res := range f.m.IncrementalAlterConfigs(context.Background(), generationUpdate(1), false) {
			if res.ErrorCode != kafkaerr.None {
				t.Fatalf("first update: %s", res.ErrorMessage)
			}
		}
		fsys.SetInjector(dieAt(step))
		results := f.m.IncrementalAlterConfigs(context.Background(), generationUpdate(2), false)
		acked := results[0].ErrorCode == kafkaerr.None && results[1].ErrorCode == kafkaerr.None
		if results[0].ErrorCode != results[1].ErrorCode {
			t.Fatalf("step %d: one request, different outcomes: %+v", step, results)
		}
		// The process that saw the failure keeps serving the old values.
		if g, err := generationOf(f.m); err != nil || (!acked && g != 1) || (acked && g != 2) {
			t.Fatalf("step %d: live values are update %d (%v) after acked=%v", step, g, err, acked)
		}

		crashes := map[string]*faultfs.CrashFS{
			"process crash":          mem,
			"power cut":              mem.CrashClone(faultfs.CrashOptions{}),
			"power cut, torn writes": mem.CrashClone(faultfs.CrashOptions{Rand: rng}),
		}
		for name, after := range crashes {
			r, err := tryOpen(t, "/data", st, after)
			if err != nil {
				t.Fatalf("step %d, %s: reopen: %v", step, name, err)
			}
			got, err := generationOf(r.m)
			switch {
			case err != nil:
				t.Fatalf("step %d, %s: %v", step, name, err)
			case acked && got != 2:
				t.Fatalf("step %d, %s: update 2 was acknowledged, reopen finds %d", step, name, got)
			case got != 1 && got != 2:
				t.Fatalf("step %d, %s: reopen finds %d, want 1 or 2", step, name, got)
			}
			names, err := after.ReadDir("/data/config")
			if err != nil {
				t.Fatalf("step %d, %s: %v", step, name, err)
			}
			for _, n := range names {
				if n != filepath.Base(storePath("/data")) {
					t.Fatalf("step %d, %s: %s left in the config directory after reopen", step, name, n)
				}
			}
		}
		if acked {
			sawAck = true
			break
		}
		sawFailure = true
	}
	if !sawAck || !sawFailure {
		t.Fatalf("the fault never hit the update (failure seen %v) or it never succeeded (%v)", sawFailure, sawAck)
	}
}

// TestStoreFailures checks the outcome of a failing store operation for the running process: the
// change is refused (UNKNOWN_SERVER_ERROR naming the cause), nothing changes in memory, and after
// an fsync failure every later change is refused until a restart. The operations are those of a
// change that rewrites the store file and of one that appends a change record to it.
func TestStoreFailures(t *testing.T) {
	for _, tc := range []struct {
		op     string
		kind   faultfs.OpKind
		sticky bool
		opts   Options
	}{
		{"create", faultfs.OpCreate, false, rewriting},
		{"write", faultfs.OpWrite, false, rewriting},
		{"close", faultfs.OpClose, false, rewriting},
		{"rename", faultfs.OpRename, false, rewriting},
		{"sync", faultfs.OpSync, true, rewriting},
		{"syncdir", faultfs.OpSyncDir, true, rewriting},
		{"append-write", faultfs.OpWrite, false, Options{NodeID: 1}},
		{"append-sync", faultfs.OpSync, true, Options{NodeID: 1}},
	} {
		t.Run("op="+tc.op, func(t *testing.T) {
			fsys := faultfs.Wrap(faultfs.NewCrashFS(), nil)
			f, err := tryOpenWith(t, "/data", staticOf(t), fsys, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			fsys.SetInjector(faultfs.Match(faultfs.OnKinds(tc.kind), fmt.Errorf("%s: %w", tc.op, syscall.ENOSPC)))
			res := f.alter(groupRes("g", set(keyDeliveryCountLimit, "7")))
			if res.ErrorCode != kafkaerr.UnknownServerError || !strings.Contains(res.ErrorMessage, "no space left on device") ||
				strings.Contains(res.ErrorMessage, "/data") {
				t.Fatalf("alter with failing %s: %+v, want the cause without the store's path", tc.op, res)
			}
			if got := f.m.groupInt("g", keyDeliveryCountLimit); got != 5 {
				t.Fatalf("a refused change is visible: delivery count limit %d", got)
			}
			fsys.SetInjector(nil)
			res = f.alter(groupRes("g", set(keyDeliveryCountLimit, "8")))
			switch {
			case tc.sticky && (res.ErrorCode != kafkaerr.UnknownServerError || !strings.Contains(res.ErrorMessage, "restart")):
				t.Fatalf("after a failed %s the store must refuse changes until a restart: %+v", tc.op, res)
			case !tc.sticky && res.ErrorCode != kafkaerr.None:
				t.Fatalf("after a failed %s the next change should work: %+v", tc.op, res)
			}
		})
	}
}

// TestUpdateAfterFailedCleanUp: a rewrite of the store whose write failed and whose temporary
// file could not be removed either leaves that file behind; the next update replaces it and
// succeeds.
func TestUpdateAfterFailedCleanUp(t *testing.T) {
	mem := newDataFS(t)
	fsys := faultfs.Wrap(mem, nil)
	f, err := tryOpenWith(t, "/data", staticOf(t), fsys, rewriting)
	if err != nil {
		t.Fatal(err)
	}
	fsys.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpWrite, faultfs.OpRemove), syscall.EIO))
	if res := f.alter(groupRes("g", set(keyDeliveryCountLimit, "7"))); res.ErrorCode != kafkaerr.UnknownServerError {
		t.Fatalf("alter with failing writes and removals: %+v, want UNKNOWN_SERVER_ERROR", res)
	}
	tmp := storePath("/data") + tmpSuffix
	if _, err := mem.ReadFile(tmp); err != nil {
		t.Fatalf("the failed update left no %s behind (%v): the test does not reach the case", tmp, err)
	}
	fsys.SetInjector(nil)
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "8")))
	r, err := tryOpen(t, "/data", staticOf(t), mem.CrashClone(faultfs.CrashOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.m.groupInt("g", keyDeliveryCountLimit); got != 8 {
		t.Fatalf("delivery count limit %d after a power cut, want the acknowledged 8", got)
	}
}

// TestLeftoverTempFile checks that an unfinished update (a store.tmp next to the store, whole
// or torn) is ignored and removed on open.
func TestLeftoverTempFile(t *testing.T) {
	dir := t.TempDir()
	f := openFixture(t, dir, staticOf(t))
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "7")))
	_ = f.m.Close()
	good, err := os.ReadFile(storePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	newer := strings.Replace(string(good), `"7"`, `"9"`, 1)
	for name, tmp := range map[string]string{"whole": newer, "torn": newer[:len(newer)/2], "empty": ""} {
		t.Run(name, func(t *testing.T) {
			tmpPath := storePath(dir) + tmpSuffix
			if err := os.WriteFile(tmpPath, []byte(tmp), 0o644); err != nil {
				t.Fatal(err)
			}
			r := openFixture(t, dir, staticOf(t))
			if got := r.m.groupInt("g", keyDeliveryCountLimit); got != 7 {
				t.Fatalf("delivery count limit %d after reopen, want the acknowledged 7", got)
			}
			if _, err := os.Stat(tmpPath); !os.IsNotExist(err) {
				t.Fatalf("leftover %s not removed: %v", tmpPath, err)
			}
			_ = r.m.Close()
		})
	}
}

// TestDamagedStore corrupts the snapshot of a store file in every way the format detects and
// checks that start-up stops with a *StoreError naming the file and the damage.
func TestDamagedStore(t *testing.T) {
	base := t.TempDir()
	f, err := tryOpenWith(t, base, staticOf(t), vfs.OS(), rewriting)
	if err != nil {
		t.Fatal(err)
	}
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "7")))
	_ = f.m.Close()
	good, err := os.ReadFile(storePath(base))
	if err != nil {
		t.Fatal(err)
	}
	nl := strings.IndexByte(string(good), '\n')
	header, body := string(good[:nl+1]), string(good[nl+1:])
	current, newer := fmt.Sprintf("%s %d ", storeMagic, storeVersion), fmt.Sprintf("%s %d ", storeMagic, storeVersion+1)
	// reheader frames a body with a correct header, to reach the checks behind the checksum.
	reheader := func(body string) string {
		return fmt.Sprintf("%s %d %d %08x\n", storeMagic, storeVersion, len(body), crc32.Checksum([]byte(body), castagnoli)) + body
	}
	for _, tc := range []struct {
		name, data, reason string
	}{
		{"empty file", "", "the file is empty"},
		{"torn header", header[:10], "no header line"},
		{"not a store", "hello world\n{}", "bad header"},
		{"newer version", strings.Replace(header, current, newer, 1) + body, fmt.Sprintf("format version %d", storeVersion+1)},
		{"version 0", strings.Replace(header, current, storeMagic+" 0 ", 1) + body, "format version 0"},
		// A damaged version digit in a damaged file is damage, not a newer release's store.
		{"newer version, damaged body", strings.Replace(header, current, newer, 1) + "X" + body[1:], "checksum mismatch"},
		// The earlier format has nothing after its body.
		{"version 1, trailing bytes", strings.Replace(header, current, storeMagic+" 1 ", 1) + body + "change", "unexpected bytes"},
		{"bad length", strings.Replace(header, fmt.Sprintf(" %d ", len(body)), " x ", 1) + body, "bad body length"},
		{"truncated body", header + body[:len(body)-5], "truncated"},
		{"trailing bytes", header + body + "garbage", "unexpected bytes"},
		{"flipped bit", header + strings.Replace(body, `"7"`, `"8"`, 1), "checksum mismatch"},
		{"bad checksum field", header[:len(header)-9] + "zzzzzzzz\n" + body, "bad checksum field"},
		{"bad json", reheader(`{"num_partitions": 50,`), "bad contents"},
		{"unknown field", reheader(`{"num_partitions": 50, "extra": 1}`), "bad contents"},
		{"two values", reheader(`{"num_partitions": 50} {}`), "more than one JSON value"},
		{"no partitions", reheader(`{"num_partitions": 0}`), "num.partitions is 0"},
		{"empty group id", reheader(`{"num_partitions": 50, "groups": {"": {"a": "b"}}}`), "empty group id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := storePath(dir)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := tryOpen(t, dir, staticOf(t), vfs.OS())
			var se *StoreError
			if !errors.As(err, &se) {
				t.Fatalf("open: %v, want a *StoreError", err)
			}
			if se.Path != path || !strings.Contains(err.Error(), path) || !strings.Contains(se.Reason, tc.reason) {
				t.Fatalf("error %q: want path %s and reason containing %q", err, path, tc.reason)
			}
			// A store of a newer release is not damaged: moving it away would lose what it holds.
			newer := tc.name == "newer version"
			if se.Newer != newer || strings.Contains(err.Error(), "is damaged") == newer ||
				strings.Contains(err.Error(), "run that release or a later one") != newer {
				t.Fatalf("error %q (Newer %v): want Newer %v and the advice that goes with it", err, se.Newer, newer)
			}
		})
	}
}
