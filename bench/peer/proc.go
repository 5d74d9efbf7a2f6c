package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is a server process the benchmark started: etcd or coordinatord. Its output goes to a log
// file, appended to across restarts.
type proc struct {
	name string
	bin  string
	args []string
	log  string

	cmd  *exec.Cmd
	done chan struct{}
}

// start starts the process; it must not be running.
func (p *proc) start() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return nil
}

// running reports whether the process was started and has not exited.
func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, and SIGKILL if the process is still there after timeout.
func (p *proc) stop(timeout time.Duration) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
	}
}

// exitedError says that the process ended while the benchmark waited for it, with the end of its
// log.
func (p *proc) exitedError() error {
	return fmt.Errorf("%s exited (%s); the end of its log %s:\n%s", p.name, p.cmd.ProcessState, p.log, tail(p.log, 2000))
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// httpStatus is the status code of a GET of url, 0 when it could not be fetched.
func httpStatus(ctx context.Context, url string) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls ok every interval until it holds, p exits, ctx ends or timeout passes.
func waitFor(ctx context.Context, p *proc, timeout, interval time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if p != nil && !p.running() {
			return p.exitedError()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return nil
}

// checkFree fails when another process listens on one of addrs, so that a benchmark never
// measures a server it did not start.
func checkFree(addrs ...string) error {
	var errs []error
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is in use (%w): stop what listens there", a, err))
			continue
		}
		_ = l.Close()
	}
	return errors.Join(errs...)
}
