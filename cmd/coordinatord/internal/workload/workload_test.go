package workload

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
	"github.com/coordinatord/coordinatord/internal/shard"
	"github.com/coordinatord/coordinatord/internal/statelog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestShapeValidate(t *testing.T) {
	ok := Shape{GroupID: "g", SharePartitions: 1, StateBatches: 4, BatchesPerWrite: 2}
	tests := []struct {
		name    string
		mutate  func(*Shape)
		wantErr bool
	}{
		{name: "valid", mutate: func(*Shape) {}},
		{name: "no group", mutate: func(s *Shape) { s.GroupID = "" }, wantErr: true},
		{name: "no share partitions", mutate: func(s *Shape) { s.SharePartitions = 0 }, wantErr: true},
		{name: "no state batches", mutate: func(s *Shape) { s.StateBatches = 0 }, wantErr: true},
		{name: "no batches per write", mutate: func(s *Shape) { s.BatchesPerWrite = 0 }, wantErr: true},
		{name: "more per write than held", mutate: func(s *Shape) { s.BatchesPerWrite = 5 }, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.mutate(&s)
			if err := s.Validate(); (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

type limit int

func (l limit) SnapshotUpdateRecordsPerSnapshot(string) int { return int(l) }

// TestWindowThroughAShard checks, against a real shard, that a share partition's state settles at
// exactly StateBatches batches, whatever the snapshot cadence.
func TestWindowThroughAShard(t *testing.T) {
	tests := []struct {
		name  string
		shape Shape
		limit int
	}{
		{name: "even window", shape: Shape{GroupID: "g", SharePartitions: 2, StateBatches: 10, BatchesPerWrite: 2}, limit: 3},
		{name: "odd window", shape: Shape{GroupID: "g", SharePartitions: 1, StateBatches: 7, BatchesPerWrite: 3}, limit: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := shard.Open(zaptest.NewLogger(t), limit(tc.limit), shard.Options{WriteTimeout: time.Minute}, shard.NewLocalLog(nil, t.TempDir(), statelog.Options{}))
			defer s.Close()
			if err := s.WaitLoaded(ctx); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.shape.SharePartitions; i++ {
				p := tc.shape.NewPartition(i)
				if r := s.Initialize(ctx, p.Initialize()); r.Code != kafkaerr.None {
					t.Fatal(r)
				}
				var buf []shard.StateBatch
				for w := 0; w < 3*tc.shape.StateBatches; w++ {
					req := p.Next(buf)
					buf = req.StateBatches
					if r := s.Write(ctx, req); r.Code != kafkaerr.None {
						t.Fatal(r)
					}
				}
				got := s.Read(ctx, shard.ReadRequest{Key: p.Key(), LeaderEpoch: 1})
				if got.Code != kafkaerr.None {
					t.Fatal(got.Result)
				}
				if len(got.StateBatches) != tc.shape.StateBatches {
					t.Fatalf("share partition %d holds %d batches, want %d: %+v", i, len(got.StateBatches), tc.shape.StateBatches, got.StateBatches)
				}
				if first := got.StateBatches[0].FirstOffset; first != got.StartOffset {
					t.Fatalf("the window starts at %d, the start offset is %d", first, got.StartOffset)
				}
			}
		})
	}
}
