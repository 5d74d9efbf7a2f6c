package clustertest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireRoot skips the test, saying why, unless it runs as root.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root (it %s); run the tests as root to include it, as CI does", why)
	}
}

// mountTmpfs mounts a tmpfs of size (mount's size option, e.g. "64M") on a new directory and
// returns it; it is unmounted when the test ends, after the processes that use it (cleanups
// registered later run first).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file into dir until its file system has no space left, and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
}

// TestDiskFullReplica runs one node's data directory on a small tmpfs and fills it under load, so
// that the node's next append to a replica's state log fails with ENOSPC. A replica that cannot
// append a committed entry can neither apply it nor skip it: the node must log why and exit with
// status 1, rather than serve from a replica that lost an entry. The other two go on serving
// every key. Once the space is freed, the node restarts, catches up and the history is
// linearizable with every acknowledged write read back.
func TestDiskFullReplica(t *testing.T) {
	requireRoot(t, "mounts a tmpfs")
	dir := mountTmpfs(t, "64M")
	c := newCluster(t, clusterOptions{nodes: 3, dataDirs: []string{"", "", dir}})
	c.start()
	w := newWorkload(t, c, workloadOptions{})
	w.run()
	loadFor(time.Second)

	full := c.node(3)
	filler := fill(t, dir)
	filled := w.hist.now()
	code, sig := full.wait(time.Minute)
	exited := w.hist.now()
	if code != 1 || sig != 0 {
		t.Errorf("node 3 with a full disk: exit status %d, signal %v; want status 1", code, sig)
	}
	l, ok := full.current().waitLine(time.Second, func(l logLine) bool {
		return l.Level == "error" && l.Msg == "stopping: a replica cannot go on"
	})
	if !ok {
		t.Errorf("node 3 did not log why it stopped\n%s", full.current().tail(20))
	} else if e, _ := l.Fields["error"].(string); !strings.Contains(e, "no space left on device") {
		t.Errorf("node 3 stopped on %q, want a log that failed for lack of space", e)
	}
	t.Logf("node 3 exited %v after its disk filled: %v", time.Duration(exited-filled).Round(time.Millisecond), l.Fields["error"])

	c.waitLeaders(c.others(3), leaderTimeout)
	elected := w.hist.now()
	loadFor(2 * time.Second)
	w.requireServed(elected, w.hist.now(), "with node 3 out of disk space")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	full.start()
	full.waitReady(readyTimeout)
	c.waitLeaders(c.nodes, leaderTimeout)
	loadFor(time.Second)
	w.finish()
}
