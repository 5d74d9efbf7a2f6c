package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// The attack tests: each runs an attack found against one node on loopback, with bounds small
// enough to reach in a few seconds, while a legitimate client on another source address of
// 127.0.0.0/8 keeps calling; every call of the legitimate client must succeed within a second.

// metricValue is the sum of the samples of metric whose labels include labels, scraped from the
// plaintext metrics port at addr.
func metricValue(t *testing.T, addr, metric string, labels map[string]string) float64 {
	t.Helper()
	return metricValueFrom(t, http.DefaultClient, "http://"+addr, metric, labels)
}

func metricValueFrom(t *testing.T, client *http.Client, base, metric string, labels map[string]string) float64 {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	sum := 0.0
	for _, m := range families[metric].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if match {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// dialerFrom dials TCP from the loopback address from.
func dialerFrom(from string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
}

// newClientFrom is a gRPC connection to addr from the loopback address from, with creds (nil:
// plaintext), that the caller closes.
func newClientFrom(t *testing.T, addr, from string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	d := dialerFrom(from)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// clientFrom is newClientFrom closed at the end of the test.
func clientFrom(t *testing.T, addr, from string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn := newClientFrom(t, addr, from, creds)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// flood is an attacker: n workers, each holding one connection at a time from the address from
// to addr, opened by open, until the server closes it, then opening the next 100 ms later; until
// stop is called.
type flood struct {
	closed   atomic.Int64 // connections the server closed
	held     atomic.Int64 // connections open now
	longest  atomic.Int64 // longest time, in ns, the server kept one open
	stopping chan struct{}
	wg       sync.WaitGroup
}

func startFlood(n int, addr, from string, open func(c net.Conn) error) *flood {
	f := &flood{stopping: make(chan struct{})}
	d := dialerFrom(from)
	for range n {
		f.wg.Go(func() {
			for {
				select {
				case <-f.stopping:
					return
				default:
				}
				c, err := d.Dial("tcp", addr)
				if err == nil {
					f.hold(c, open)
				}
				select {
				case <-f.stopping:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	return f
}

// hold runs open on c, then waits until the server closes c or the flood stops.
func (f *flood) hold(c net.Conn, open func(net.Conn) error) {
	defer c.Close()
	f.held.Add(1)
	defer f.held.Add(-1)
	began := time.Now()
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if open != nil && open(c) != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c) // until the server closes it
	}()
	select {
	case <-gone:
		f.closed.Add(1)
		if took := int64(time.Since(began)); took > f.longest.Load() {
			f.longest.Store(took)
		}
	case <-f.stopping:
		_ = c.Close()
		<-gone
	}
}

func (f *flood) stop() {
	close(f.stopping)
	f.wg.Wait()
}

// floodHolding starts a flood (startFlood) that stops at the end of the test, and waits until it
// holds at least holding connections at once.
func floodHolding(t *testing.T, n int, addr, from string, holding int64, open func(net.Conn) error) *flood {
	t.Helper()
	f := startFlood(n, addr, from, open)
	t.Cleanup(f.stop)
	for f.held.Load() < holding {
		time.Sleep(10 * time.Millisecond)
	}
	return f
}

// served calls call every 50 ms for d and fails the test if a call fails or takes a second or
// more; it returns the latencies.
func served(t *testing.T, d time.Duration, call func(ctx context.Context) error) []time.Duration {
	t.Helper()
	var lat []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		began := time.Now()
		err := call(ctx)
		took := time.Since(began)
		cancel()
		if err != nil || took >= time.Second {
			t.Fatalf("a legitimate call took %v: %v", took, err)
		}
		lat = append(lat, took)
	}
	return lat
}

// checkOnNewConnection connects to addr from the address from and makes a health check.
func checkOnNewConnection(ctx context.Context, t *testing.T, addr, from string, creds credentials.TransportCredentials) error {
	conn := newClientFrom(t, addr, from, creds)
	defer conn.Close()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	return err
}

// TestSilentConnectionsDoNotLockThePort: sockets that never send a byte, from one address, as many
// as it is allowed and more, reopened as soon as they are closed, neither keep a client on
// another address from being served nor hold a place past the handshake timeout.
func TestSilentConnectionsDoNotLockThePort(t *testing.T) {
	p := startProc(t, t.TempDir(), "--override", "grpc.max.connections=64", "--override", "max.connections.per.ip=16",
		"--override", "connections.handshake.timeout.ms=1000")
	f := floodHolding(t, 100, p.grpcAddr, "127.0.0.1", 16, nil)
	served(t, 3*time.Second, func(ctx context.Context) error {
		return checkOnNewConnection(ctx, t, p.grpcAddr, "127.0.0.2", nil)
	})
	// A new client from another address connects and is served during the flood too.
	other := pb.NewShareCoordinatorServiceClient(clientFrom(t, p.grpcAddr, "127.0.0.3", nil))
	if _, err := other.FindCoordinator(ctxT(t), &pb.FindCoordinatorRequest{Keys: []string{"g:" + topicA + ":0"}}); err != nil {
		t.Fatalf("a new client during the flood: %v", err)
	}
	if longest := time.Duration(f.longest.Load()); f.closed.Load() == 0 || longest > 3*time.Second {
		t.Fatalf("the server closed %d silent connections, the longest after %v; want each closed after about 1 s", f.closed.Load(), longest)
	}
	perIP := map[string]string{"listener": "grpc", "reason": "per_ip"}
	if got := metricValue(t, p.metricsAddr, "sharecoord_connections_refused_total", perIP); got == 0 {
		t.Fatalf("sharecoord_connections_refused_total%v = 0 after a flood past max.connections.per.ip", perIP)
	}
	waitForLog(t, p, regexp.MustCompile(`grpc port: refused a connection: its address holds max.connections.per.ip connections`))
}

// TestClientsWithoutCertificatesDoNotLockOutBrokers: with tls.client.auth=required, sockets that
// never start their handshake and clients that present no certificate do not keep a broker
// holding one from being served.
func TestClientsWithoutCertificatesDoNotLockOutBrokers(t *testing.T) {
	fx := newSecurityFixture(t)
	p := startSecureProc(t, t.TempDir(), fx.clientTLS(t, brokerSubject()), fx.args("required",
		"--override", "grpc.max.connections=64", "--override", "max.connections.per.ip=16",
		"--override", "connections.handshake.timeout.ms=1000")...)
	brokerCreds := credentials.NewTLS(fx.clientTLS(t, brokerSubject()))
	silent := floodHolding(t, 50, p.grpcAddr, "127.0.0.1", 16, nil)
	noCert := fx.clientTLS(t, nil)
	noCert.NextProtos = []string{"h2"}
	anonymous := floodHolding(t, 50, p.grpcAddr, "127.0.0.3", 0, func(c net.Conn) error {
		return tls.Client(c, noCert).Handshake()
	})
	served(t, 3*time.Second, func(ctx context.Context) error {
		return checkOnNewConnection(ctx, t, p.grpcAddr, "127.0.0.2", brokerCreds)
	})
	if silent.closed.Load() == 0 || anonymous.closed.Load() == 0 {
		t.Fatalf("the server closed %d silent connections and %d without a certificate; want both closed", silent.closed.Load(), anonymous.closed.Load())
	}
}

// TestIdleConnectionsAreClosed: real clients that make no call, while they answer every
// keepalive, hold their connections no longer than connections.max.idle.ms.
func TestIdleConnectionsAreClosed(t *testing.T) {
	p := startProc(t, t.TempDir(), "--override", "connections.max.idle.ms=500")
	grpcOpen := map[string]string{"listener": "grpc"}
	for range 8 {
		conn := clientFrom(t, p.grpcAddr, "127.0.0.4", nil)
		if _, err := healthpb.NewHealthClient(conn).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	for metricValue(t, p.metricsAddr, "sharecoord_connections_open", grpcOpen) > 0 {
		if time.Since(began) > 10*time.Second {
			t.Fatalf("%v gRPC connections still open 10 s after their last call, with connections.max.idle.ms=500",
				metricValue(t, p.metricsAddr, "sharecoord_connections_open", grpcOpen))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The test's own client reconnects at its next call.
	if _, err := healthpb.NewHealthClient(p.conn).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call after the idle connection was closed: %v", err)
	}
}

// TestMetricsPortIsBounded: hundreds of connections to the metrics port from one address take
// at most metrics.max.connections.per.ip places: the probes, from another address, are served,
// and under a file descriptor limit the connection caps leave the state logs and the config
// store the descriptors they need, so that a config change and a write still go through.
func TestMetricsPortIsBounded(t *testing.T) {
	dir := t.TempDir()
	// 400 descriptors, of which the binary and the state logs of 4 partitions are given 272: the
	// caps are lowered to 120 gRPC and 8 metrics connections, and the log says so. The floods
	// open 550, past the limit.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n 400 && exec "$0" "$@"`, binPath)
	cmd.Args = append(cmd.Args, serverArgs(dir, "--override", "share.coordinator.state.topic.num.partitions=4",
		"--override", "metrics.max.connections.per.ip=4")...)
	p := startCommand(t, cmd, dir)
	waitForLog(t, p, regexp.MustCompile(`the file descriptor limit \(ulimit -n\) is too low for the connection caps`))
	floodHolding(t, 250, p.metricsAddr, "127.0.0.1", 4, nil)
	floodHolding(t, 300, p.grpcAddr, "127.0.0.3", 100, nil)
	probe := &http.Client{Transport: &http.Transport{DialContext: dialerFrom("127.0.0.2").DialContext, DisableKeepAlives: true}}
	served(t, 2*time.Second, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metricsAddr+"/healthz", nil)
		resp, err := probe.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %s", resp.Status)
		}
		return nil
	})
	setGroupConfig(t, p, "during-flood", "share.delivery.count.limit", "6")
	if r, err := p.state.InitializeShareGroupState(ctxT(t), initReq("during-flood", topicA, 1, 1, 0)); err != nil || r.Results[0].Partitions[0].ErrorCode != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("a write during the flood: %v %v", r, err)
	}
	if refused := metricValueFrom(t, probe, "http://"+p.metricsAddr, "sharecoord_connections_refused_total", map[string]string{"listener": "metrics"}); refused == 0 {
		t.Fatal("no metrics connection was refused during the flood")
	}
	if strings.Contains(p.log(), "too many open files") {
		t.Fatalf("the server ran out of file descriptors:\n%s", p.log())
	}
}

// residentBytes is the resident memory of process pid (0 once it is gone).
func residentBytes(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stallReads starts n reads of req on conn that are never received: a client that does not read
// its responses (its connection lets the server send 64 KiB per call).
func stallReads(ctx context.Context, conn *grpc.ClientConn, req *pb.ReadShareGroupStateRequest, n int) {
	desc := &grpc.StreamDesc{StreamName: "ReadShareGroupState", ServerStreams: true}
	for range n {
		st, err := conn.NewStream(ctx, desc, pb.ShareCoordinatorService_ReadShareGroupState_FullMethodName)
		if err == nil {
			err = st.SendMsg(req)
		}
		if err == nil {
			err = st.CloseSend()
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			return // the server closed the connection of a client that does not read
		}
	}
}

// TestUnreadLargeReadsKeepMemoryBounded: 300 concurrent reads of a 3.6 MB state (262 000
// batches), sent by clients that never read the responses, again as each client is dropped,
// raise the server's resident memory by little more than twice grpc.max.pending.response.bytes,
// and the calls of another client, on keys of other state partitions, stay under a second.
func TestUnreadLargeReadsKeepMemoryBounded(t *testing.T) {
	const budget, partitions = 16 << 20, 4
	p := startProc(t, t.TempDir(), "--override", "grpc.max.pending.response.bytes="+strconv.Itoa(budget),
		"--override", "connections.send.timeout.ms=2000", "--override", "share.coordinator.state.topic.num.partitions="+strconv.Itoa(partitions))
	ctx := ctxT(t)
	small := groupOn("small-", (statePartitionOf("big", partitions)+1)%partitions, partitions)
	if _, err := p.state.InitializeShareGroupState(ctx, initReq("big", topicA, 0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	batches := make([]*pb.StateBatch, 262_000)
	for i := range batches {
		batches[i] = &pb.StateBatch{FirstOffset: int64(2 * i), LastOffset: int64(2 * i), DeliveryState: 2, DeliveryCount: 1}
	}
	if r, err := p.state.WriteShareGroupState(ctx, writeReq("big", topicA, 0, 0, batches...)); err != nil || r.Results[0].Partitions[0].ErrorCode != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("write 262 000 batches: %v %v", r, err)
	}
	batches = nil
	legit := pb.NewShareCoordinatorServiceClient(clientFrom(t, p.grpcAddr, "127.0.0.2", nil))
	if _, err := legit.InitializeShareGroupState(ctx, initReq(small, topicA, 0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	baseline := residentBytes(pid)

	attackCtx, stopAttack := context.WithCancel(context.Background())
	var peak atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(func() { stopAttack(); wg.Wait() })
	for range 3 { // three clients, each reconnecting once dropped
		wg.Go(func() {
			for attackCtx.Err() == nil {
				conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
				if err != nil {
					return
				}
				stallReads(attackCtx, conn, readReq("big", topicA, 0, 1), 100)
				// Until the server drops the connection.
				for st := conn.GetState(); st == connectivity.Ready || st == connectivity.Connecting; st = conn.GetState() {
					if !conn.WaitForStateChange(attackCtx, st) {
						break
					}
				}
				_ = conn.Close()
			}
		})
	}
	wg.Go(func() {
		for attackCtx.Err() == nil {
			peak.Store(max(peak.Load(), residentBytes(pid)))
			time.Sleep(20 * time.Millisecond)
		}
	})
	lat := served(t, 4*time.Second, func(ctx context.Context) error {
		r, err := legit.WriteShareGroupState(ctx, writeReq(small, topicA, 0, 0, &pb.StateBatch{FirstOffset: 0, LastOffset: 9, DeliveryState: 2, DeliveryCount: 1}))
		if err == nil && r.Results[0].Partitions[0].ErrorCode != pb.ErrorCode_ERROR_CODE_NONE {
			err = fmt.Errorf("write: %v", r.Results[0].Partitions[0])
		}
		return err
	})
	stopAttack()
	wg.Wait()
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	grew := peak.Load() - baseline
	t.Logf("resident memory %d MB before the attack, %d MB at its peak; legitimate writes p99 %v", baseline>>20, peak.Load()>>20, p99)
	// Under the race detector every byte the program allocates takes shadow memory too.
	held := int64(2 * budget)
	if raceEnabled {
		held *= 4
	}
	if limit := held + 96<<20; grew > limit {
		t.Fatalf("the attack raised resident memory by %d MB, more than %d MB (what grpc.max.pending.response.bytes lets the responses hold, and 96 MB)", grew>>20, limit>>20)
	}
	if stalled := metricValue(t, p.metricsAddr, "sharecoord_stalled_responses_total", nil); stalled == 0 {
		t.Fatal("no response was counted as stalled")
	}
	if refused := metricValue(t, p.metricsAddr, "sharecoord_read_responses_refused_total", nil); refused == 0 {
		t.Fatal("no read was refused: the attack never filled grpc.max.pending.response.bytes")
	}
}

// TestClusterNodeHasTheSameBounds: a cluster node serves its gRPC and metrics ports on the same
// bounded listeners as a single node: floods from one address are refused past their per-address
// bounds while a client on another address is served.
func TestClusterNodeHasTheSameBounds(t *testing.T) {
	raft := freePort(t)
	p := startProc(t, t.TempDir(), "--initial-cluster", "1="+raft, "--raft-listen", raft,
		"--override", "max.connections.per.ip=8", "--override", "metrics.max.connections.per.ip=2",
		"--override", "connections.handshake.timeout.ms=1000")
	floodHolding(t, 30, p.grpcAddr, "127.0.0.1", 8, nil)
	floodHolding(t, 30, p.metricsAddr, "127.0.0.1", 2, nil)
	served(t, 2*time.Second, func(ctx context.Context) error {
		return checkOnNewConnection(ctx, t, p.grpcAddr, "127.0.0.2", nil)
	})
	probe := &http.Client{Transport: &http.Transport{DialContext: dialerFrom("127.0.0.2").DialContext, DisableKeepAlives: true}}
	for _, listener := range []string{"grpc", "metrics"} {
		refused := map[string]string{"listener": listener, "reason": "per_ip"}
		if got := metricValueFrom(t, probe, "http://"+p.metricsAddr, "sharecoord_connections_refused_total", refused); got == 0 {
			t.Errorf("sharecoord_connections_refused_total%v = 0 on a cluster node after a flood from one address", refused)
		}
	}
}
