package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/coordinatord/coordinatord/internal/datadir"
)

// TestNoPartitionServingIsNotReady: when the log of every state partition is damaged, the
// process finishes starting yet serves no key, so the probes' /readyz?exclude=failed answers 503
// and gRPC health NOT_SERVING (the pod leaves the Service) while /healthz stays 200 (it is not
// restarted over and over).
func TestNoPartitionServingIsNotReady(t *testing.T) {
	const partitions = 2
	args := []string{"--override", "share.coordinator.state.topic.num.partitions=" + strconv.Itoa(partitions)}
	dir := t.TempDir()
	p := startProc(t, dir, args...)
	for sp := range partitions {
		mustInitialize(ctxT(t), t, p, groupOn("g-", sp, partitions), topicA, 0, 1)
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p.log())
	}
	for sp := range partitions {
		segs, err := filepath.Glob(filepath.Join(datadir.PartitionDir(dir, sp), "*.seg"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("no segment in partition %d: %v", sp, err)
		}
		data, err := os.ReadFile(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)-2] ^= 0x40 // after a clean stop, damage at the tail is corruption
		if err := os.WriteFile(segs[0], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	p = launch(t, exec.Command(binPath, serverArgs(dir, args...)...), dir)
	waitForLog(t, p, regexp.MustCompile(`"msg":"state partitions loaded".*"failed":2`))
	base := "http://" + p.metricsAddr
	var code int
	var body string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		code, body = httpGet(t, http.DefaultClient, base+"/readyz?exclude=failed")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "no state partition of this node is active") &&
			!strings.Contains(body, "start-up has not finished") { // gRPC health has been set since
			break
		}
		if code == http.StatusOK {
			t.Fatalf("/readyz?exclude=failed with every partition failed: 200 %q", body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz?exclude=failed with every partition failed: %d %q, want 503 saying no partition is active", code, body)
		}
	}
	if code, _ := httpGet(t, http.DefaultClient, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d, want 200: the process is alive", code)
	}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, err := healthpb.NewHealthClient(conn).Check(ctxT(t), &healthpb.HealthCheckRequest{})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health with every partition failed: %v %v, want NOT_SERVING", r, err)
	}
}
