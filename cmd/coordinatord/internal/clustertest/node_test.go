package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/proclog"
)

// The ports of every node: each node has an address of its own (a loopback address, or its
// network namespace's), so that a node restarts on the same addresses and the others, and the
// client, find it there again.
const (
	grpcPort    = "7070"
	metricsPort = "7071"
	raftPort    = "7072"
)

// node is one member of a test cluster and the processes it ran, one at a time.
type node struct {
	t       *testing.T
	id      int
	host    string // the node's IP address
	netns   string // the network namespace it runs in; "" for the test's own
	dataDir string
	args    []string // the server's arguments

	mu   sync.Mutex
	proc *process   // the latest process; nil before the first start
	runs []*process // every process, for the logs of a failed test
}

func (n *node) grpcAddr() string    { return net.JoinHostPort(n.host, grpcPort) }
func (n *node) metricsAddr() string { return net.JoinHostPort(n.host, metricsPort) }
func (n *node) raftAddr() string    { return net.JoinHostPort(n.host, raftPort) }
func (n *node) String() string      { return "node " + strconv.Itoa(n.id) }

// process is one run of a node's server.
type process struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
	exitErr error        // valid once exited is closed
	stderr  *proclog.Log // its log, a JSON object a line
}

// start runs a new process of the node and waits for its "serving" line (it listens; whether it
// serves every partition is /readyz's to say, see waitReady).
func (n *node) start() {
	n.t.Helper()
	n.mu.Lock()
	if n.proc != nil && !n.proc.done() {
		n.mu.Unlock()
		n.t.Fatalf("%v: started while its process %d still runs", n, n.proc.cmd.Process.Pid)
	}
	var cmd *exec.Cmd
	if n.netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", n.netns, binPath}, n.args...)...)
	} else {
		cmd = exec.Command(binPath, n.args...)
	}
	// Its own process group: signals go to the group, which `ip netns exec` (an exec, not a
	// fork) leaves holding the server alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		n.mu.Unlock()
		n.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		n.t.Fatalf("%v: start: %v", n, err)
	}
	p := &process{cmd: cmd, started: time.Now(), exited: make(chan struct{}), stderr: proclog.New()}
	n.proc = p
	n.runs = append(n.runs, p)
	n.mu.Unlock()
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		p.stderr.Read(stderr, nil)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read everything first
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	if _, ok := p.waitLine(time.Minute, func(l logLine) bool { return l.Msg == "serving" }); !ok {
		n.t.Fatalf("%v did not report serving (exit: %v)\n%s", n, p.exitErr, p.tail(40))
	}
}

// current returns the node's latest process.
func (n *node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// signal sends sig to the node's process group.
func (n *node) signal(sig syscall.Signal) {
	n.t.Helper()
	p := n.current()
	if p == nil || p.done() {
		n.t.Fatalf("%v: %v sent to no running process", n, sig)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		n.t.Fatalf("%v: send %v: %v", n, sig, err)
	}
}

// kill ends the node's process with SIGKILL (a crash: nothing is handed over or flushed) and
// waits until it is gone.
func (n *node) kill() {
	n.t.Helper()
	n.signal(syscall.SIGKILL)
	if code, sig := n.wait(time.Minute); sig != syscall.SIGKILL {
		n.t.Fatalf("%v: after SIGKILL: exit status %d, signal %v", n, code, sig)
	}
}

// terminate stops the node's process with SIGTERM, a planned stop that hands its leaderships
// over, and checks that it exits 0.
func (n *node) terminate() {
	n.t.Helper()
	n.signal(syscall.SIGTERM)
	if code, sig := n.wait(time.Minute); code != 0 || sig != 0 {
		n.t.Fatalf("%v: after SIGTERM: exit status %d, signal %v\n%s", n, code, sig, n.current().tail(40))
	}
}

// pause stops the node's process with SIGSTOP: it holds its sockets and its state but runs
// nothing, as a process that a long pause (a stall, a VM migration) freezes. It returns once
// every thread of the process is stopped (kill(2) may return before those running on another
// core are).
func (n *node) pause() {
	n.t.Helper()
	n.signal(syscall.SIGSTOP)
	pid := n.current().cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for !stopped(pid) {
		if time.Now().After(deadline) {
			n.t.Fatalf("%v: process %d not stopped 10 s after SIGSTOP", n, pid)
		}
		time.Sleep(time.Millisecond) // poll interval
	}
}

// stopped reports whether every thread of process pid is stopped (state T in
// /proc/PID/task/TID/stat).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// "TID (COMM) STATE ...": the state follows the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return true
}

// resume continues a paused process (SIGCONT).
func (n *node) resume() {
	n.t.Helper()
	n.signal(syscall.SIGCONT)
}

// wait waits until the node's latest process exits and returns its exit status, or the signal
// that ended it.
func (n *node) wait(timeout time.Duration) (code int, sig syscall.Signal) {
	n.t.Helper()
	p := n.current()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		n.t.Fatalf("%v: process did not exit within %v\n%s", n, timeout, p.tail(40))
	}
	var ee *exec.ExitError
	switch {
	case p.exitErr == nil:
		return 0, 0
	case errors.As(p.exitErr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, ws.Signal()
		}
		return ee.ExitCode(), 0
	}
	n.t.Fatalf("%v: wait: %v", n, p.exitErr)
	return 0, 0
}

// cleanup kills whatever still runs of the node (test cleanup).
func (n *node) cleanup() {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil {
		return
	}
	if !p.done() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.exited
}

// logLine is a JSON line of the server's log; Fields holds all of it.
type logLine struct {
	Level  string
	Msg    string
	TS     time.Time
	Fields map[string]any
}

func parseLogLine(s string) (logLine, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return logLine{}, false
	}
	l := logLine{Fields: m}
	l.Level, _ = m["level"].(string)
	l.Msg, _ = m["msg"].(string)
	if ts, ok := m["ts"].(string); ok {
		l.TS, _ = time.Parse(time.RFC3339Nano, ts)
	}
	return l, true
}

// int returns the integer field key of the line (false: absent or not a number).
func (l logLine) int(key string) (int64, bool) {
	f, ok := l.Fields[key].(float64)
	return int64(f), ok
}

// bool returns the boolean field key of the line.
func (l logLine) bool(key string) (value, ok bool) {
	value, ok = l.Fields[key].(bool)
	return value, ok
}

// logLines returns the lines written so far that parse as JSON.
func (p *process) logLines() []logLine {
	raw := p.stderr.Lines()
	out := make([]logLine, 0, len(raw))
	for _, s := range raw {
		if l, ok := parseLogLine(s); ok {
			out = append(out, l)
		}
	}
	return out
}

// waitLine waits until a log line satisfies match, the output ends or timeout passes.
func (p *process) waitLine(timeout time.Duration, match func(logLine) bool) (logLine, bool) {
	var found logLine
	_, ok := p.stderr.Wait(timeout, func(s string) bool {
		l, parsed := parseLogLine(s)
		if parsed && match(l) {
			found = l
			return true
		}
		return false
	})
	return found, ok
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string { return p.stderr.Tail(n) }

// saveLogs writes the log of every process of the node into dir.
func (n *node) saveLogs(dir string) error {
	n.mu.Lock()
	runs := append([]*process(nil), n.runs...)
	n.mu.Unlock()
	for i, p := range runs {
		text := p.stderr.String() + "\n"
		name := filepath.Join(dir, fmt.Sprintf("node%d-run%d.log", n.id, i+1))
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// httpClient scrapes the nodes' metrics ports. A stopped or cut-off node does not answer: the
// timeout keeps a poll from hanging on it.
var httpClient = &http.Client{Timeout: 2 * time.Second}

// get returns the status and body of GET path on the node's metrics port.
func (n *node) get(path string) (int, string, error) {
	resp, err := httpClient.Get("http://" + n.metricsAddr() + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitReady polls /readyz until it answers 200: every replica of the node caught up with the
// cluster and every state partition it holds is active.
func (n *node) waitReady(timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := n.get("/readyz")
		if err == nil && code == http.StatusOK {
			return
		}
		if p := n.current(); p.done() {
			n.t.Fatalf("%v exited while waiting for /readyz: %v\n%s", n, p.exitErr, p.tail(40))
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%v: /readyz did not answer 200 within %v: %d %q %v\n%s", n, timeout, code, body, err, n.current().tail(40))
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// metrics is one scrape of a node's cluster gauges: name → state partition → value.
type metrics map[string]map[int]float64

// scrape reads the node's per-partition sharecoord_raft_* samples.
func (n *node) scrape() (metrics, error) {
	code, body, err := n.get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%v: /metrics answered %d", n, code)
	}
	return parseMetrics(body), nil
}

// parseMetrics picks the samples of the form sharecoord_raft_NAME{partition="P"} VALUE out of a
// Prometheus text exposition.
func parseMetrics(body string) metrics {
	m := metrics{}
	for line := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(line, "sharecoord_raft_") {
			continue
		}
		name, rest, ok := strings.Cut(line, `{partition="`)
		if !ok {
			continue
		}
		part, rest, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		p, err1 := strconv.Atoi(part)
		v, err2 := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if m[name] == nil {
			m[name] = map[int]float64{}
		}
		m[name][p] = v
	}
	return m
}
