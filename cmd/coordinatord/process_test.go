package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/proclog"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// binPath is the coordinatord binary the end-to-end tests run, built once by TestMain (with the
// race detector when the tests themselves run under it).
var binPath string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "coordinatord-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "coordinatord")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build coordinatord:", err)
		return 1
	}
	return m.Run()
}

// proc is a running coordinatord process.
type proc struct {
	t           *testing.T
	cmd         *exec.Cmd
	dataDir     string
	grpcAddr    string
	metricsAddr string
	conn        *grpc.ClientConn
	state       pb.ShareCoordinatorServiceClient
	config      pb.ConfigServiceClient
	exited      chan struct{}
	exitErr     error
	stderr      *proclog.Log // every stderr line
}

// serverArgs are the server's arguments for dataDir and loopback ports chosen by the kernel,
// followed by extra.
func serverArgs(dataDir string, extra ...string) []string {
	return append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--data-dir", dataDir}, extra...)
}

// startProc starts the binary on dataDir with loopback ports chosen by the kernel and waits until
// it reports SERVING. extra are further command-line arguments.
func startProc(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	return startCommand(t, exec.Command(binPath, serverArgs(dataDir, extra...)...), dataDir)
}

func startCommand(t *testing.T, cmd *exec.Cmd, dataDir string) *proc {
	t.Helper()
	p := launch(t, cmd, dataDir)
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.connect(conn)
	return p
}

// launch starts cmd (a coordinatord server) in its own process group and waits for its
// "serving" log line, which gives the addresses it listens on.
func launch(t *testing.T, cmd *exec.Cmd, dataDir string) *proc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Own process group, so that `go run` and the server it starts are signalled together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, dataDir: dataDir, exited: make(chan struct{}), stderr: proclog.New()}
	serving := make(chan [2]string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		p.readLog(stderr, serving)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read everything first
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })

	select {
	case addrs := <-serving:
		p.grpcAddr, p.metricsAddr = addrs[0], addrs[1]
	case <-p.exited:
		t.Fatalf("coordinatord exited before serving: %v\n%s", p.exitErr, p.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("coordinatord did not report serving\n%s", p.log())
	}
	return p
}

// connect makes conn the process's client connection and waits until the server is SERVING.
func (p *proc) connect(conn *grpc.ClientConn) {
	p.conn = conn
	p.state = pb.NewShareCoordinatorServiceClient(conn)
	p.config = pb.NewConfigServiceClient(conn)
	p.waitServing()
}

// readLog collects stderr lines and reports the addresses of the "serving" line.
func (p *proc) readLog(r io.Reader, serving chan<- [2]string) {
	p.stderr.Read(r, func(line string) {
		var entry struct {
			Msg     string `json:"msg"`
			GRPC    string `json:"grpc"`
			Metrics string `json:"metrics"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving" {
			select {
			case serving <- [2]string{entry.GRPC, entry.Metrics}:
			default:
			}
		}
	})
}

// log returns everything the process wrote to stderr so far.
func (p *proc) log() string { return p.stderr.String() }

// waitLine waits until a stderr line satisfies match and returns it. The process's health and its
// log travel on different channels, so a line written before SERVING may still be in the pipe.
func (p *proc) waitLine(match func(line string) bool) (string, bool) {
	return p.stderr.Wait(time.Minute, match)
}

// waitServing blocks until the overall health is SERVING (every partition loaded), using the
// health Watch stream rather than polling.
func (p *proc) waitServing() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := healthpb.NewHealthClient(p.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		p.t.Fatalf("health watch: %v", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			p.t.Fatalf("health watch: %v\n%s", err, p.log())
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			p.waitStartedUp(ctx)
			return
		}
	}
}

// waitStartedUp waits for /readyz?exclude=failed to stop answering 503: the server marks its
// start-up finished for the probes just after gRPC health turns SERVING (never before), so a test
// that reads /readyz at once could find it a moment early. A metrics port that speaks HTTPS
// answers plain HTTP 400, and is not waited for.
func (p *proc) waitStartedUp(ctx context.Context) {
	p.t.Helper()
	for {
		resp, err := http.Get("http://" + p.metricsAddr + "/readyz?exclude=failed")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return
			}
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("/readyz?exclude=failed did not turn 200 after gRPC health served: %v\n%s", err, p.log())
		case <-time.After(time.Millisecond):
		}
	}
}

// stop sends sig to the process group and returns the exit status.
func (p *proc) stop(sig syscall.Signal) int {
	p.t.Helper()
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.t.Fatalf("coordinatord did not exit after %v\n%s", sig, p.log())
	}
	var ee *exec.ExitError
	switch {
	case p.exitErr == nil:
		return 0
	case errors.As(p.exitErr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		p.t.Fatalf("wait: %v", p.exitErr)
		return -1
	}
}

// kill ends the process group if it still runs (test cleanup).
func (p *proc) kill() {
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	if p.conn != nil {
		_ = p.conn.Close()
	}
}

// runTool runs the binary with args (a subcommand) and returns stdout, stderr and exit status.
func runTool(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runBinary(t, nil, args...)
}

// runBinary runs the binary with args, its environment extended by env, until it exits by
// itself (the test fails if it has not after two minutes), and returns stdout, stderr and exit
// status.
func runBinary(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	ctx := ctxT(t)
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("run %v: did not exit in time\n%s", args, stderr.String())
		return "", "", -1
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
		return "", "", -1
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
