package restart

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/shardconfig"
	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func smallSpec() Spec {
	return Spec{Partitions: 3, Bytes: 1 << 20, Limit: 20,
		Shape: workload.Shape{GroupID: "g", SharePartitions: 30, StateBatches: 8, BatchesPerWrite: 2}}
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Spec)
		wantErr string
	}{
		{name: "valid", mutate: func(*Spec) {}},
		{name: "no partitions", mutate: func(s *Spec) { s.Partitions = 0 }, wantErr: "partitions 0"},
		{name: "too few bytes", mutate: func(s *Spec) { s.Bytes = 10 }, wantErr: "bytes 10"},
		{name: "negative limit", mutate: func(s *Spec) { s.Limit = -1 }, wantErr: "limit -1"},
		{name: "bad shape", mutate: func(s *Spec) { s.Shape.GroupID = "" }, wantErr: "group"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := smallSpec()
			tc.mutate(&s)
			err := s.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
			}
		})
	}
}

// TestShardsAsTheServer: the benchmark's shards get every option that the server's get from the
// broker settings (shardconfig.FromBroker of the server's defaults), the prune and cold-snapshot
// intervals included; only the write timeout is the benchmark's own.
func TestShardsAsTheServer(t *testing.T) {
	const partitions = 7
	b, err := brokerDefaults(partitions)
	if err != nil {
		t.Fatal(err)
	}
	server, err := groupcfg.LoadStatic(groupcfg.Sources{Overrides: []string{
		"share.coordinator.state.topic.num.partitions=" + strconv.Itoa(partitions)}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for p := range partitions {
		got := shardconfig.FromBroker(b, dir, p)
		want := shardconfig.FromBroker(server.Broker(), dir, p)
		want.Shard.WriteTimeout = generateWriteTimeoutMs * time.Millisecond
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("partition %d: the benchmark's options %+v\nwant the server's %+v", p, got, want)
		}
		if got.Shard.PruneInterval == 0 || got.Shard.ColdSnapshotInterval == 0 {
			t.Fatalf("partition %d: no prune or cold-snapshot timer: %+v", p, got)
		}
	}
}

func TestGenerateThenMeasure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	spec := smallSpec()
	if Generated(dir, spec) {
		t.Fatal("an empty directory reports generated logs")
	}
	n, err := Generate(ctx, zaptest.NewLogger(t), dir, spec, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n < spec.Bytes {
		t.Fatalf("generated %d bytes, want at least %d", n, spec.Bytes)
	}
	if !Generated(dir, spec) {
		t.Fatal("the generated directory is not recognized")
	}
	other := spec
	other.Limit++
	if Generated(dir, other) {
		t.Fatal("a directory generated for another spec is recognized")
	}

	res, err := Measure(ctx, zaptest.NewLogger(t), dir, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Keys != int64(spec.Shape.SharePartitions) {
		t.Fatalf("restart loaded %d share partitions, want %d", res.Keys, spec.Shape.SharePartitions)
	}
	if res.Bytes != n || res.Files < spec.Partitions {
		t.Fatalf("the floor read %d bytes of %d files, want %d bytes of at least %d files", res.Bytes, res.Files, n, spec.Partitions)
	}
	if res.Restart <= 0 || res.Read <= 0 || res.Ratio() <= 0 || res.ReadBandwidth() <= 0 {
		t.Fatalf("implausible result %+v", res)
	}
}

// Generate empties only what it generated: a directory with other files in it (a server's data
// directory, say) is refused and left as it was; a generation cut short can be redone.
func TestGenerateRefusesForeignDirectory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Generate(ctx, zaptest.NewLogger(t), dir, smallSpec(), 16, nil)
	if err == nil || !strings.Contains(err.Error(), "did not generate") {
		t.Fatalf("Generate in a directory with other files: %v, want a refusal", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "precious" {
		t.Fatalf("the refused directory changed: %q, %v", b, err)
	}

	// Cut short: the context ends before the logs are complete.
	fresh := filepath.Join(t.TempDir(), "bench")
	short, stop := context.WithCancel(ctx)
	stop()
	if _, err := Generate(short, zaptest.NewLogger(t), fresh, smallSpec(), 16, nil); err == nil {
		t.Fatal("Generate with a cancelled context succeeded")
	}
	if Generated(fresh, smallSpec()) {
		t.Fatal("a generation cut short is recognized as complete")
	}
	if _, err := Generate(ctx, zaptest.NewLogger(t), fresh, smallSpec(), 16, nil); err != nil {
		t.Fatalf("regenerating after a generation cut short: %v", err)
	}
	if !Generated(fresh, smallSpec()) {
		t.Fatal("the regenerated directory is not recognized")
	}
}

// An interruption in the middle of a generation is one error, not one per writer whose call it
// cut (with the default --concurrency, 256 lines of COORDINATOR_NOT_AVAILABLE).
func TestGenerateInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spec := smallSpec()
	spec.Bytes = 1 << 40 // never reached
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := Generate(ctx, zaptest.NewLogger(t), filepath.Join(t.TempDir(), "bench"), spec, 16, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the interruption, got %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "interrupted after") {
		t.Fatalf("want one line saying the generation was interrupted, got:\n%s", msg)
	}
}
