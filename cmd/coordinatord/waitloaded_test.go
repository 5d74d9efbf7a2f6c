package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// "state partitions loaded" reports the time since the shards started loading, not since
// waitLoaded was called (after the listeners were set up, by which time small partitions have
// loaded): its took is never less than a partition's own.
func TestWaitLoadedTookCountsFromShardStart(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	start := time.Now().Add(-time.Minute)
	waitLoaded(context.Background(), zap.New(core), nil, start)
	entries := logs.FilterMessage("state partitions loaded").All()
	if len(entries) != 1 {
		t.Fatalf("logged %d summaries, want 1", len(entries))
	}
	took, ok := entries[0].ContextMap()["took"].(time.Duration)
	if !ok || took < time.Minute {
		t.Fatalf("took = %v, want at least the minute since the shards started", entries[0].ContextMap()["took"])
	}
}
