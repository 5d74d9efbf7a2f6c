package groupcfg

import (
	"fmt"
	"runtime"
	"testing"
)

// allocatedBy returns the bytes fn allocates (on any goroutine: the tests of the package run
// one at a time).
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestAlterCostIsLinearInTheRequest: a request costs (here: allocates) in proportion to its
// resources; a request 16 times larger costs no more than 16 times as much, give or take.
func TestAlterCostIsLinearInTheRequest(t *testing.T) {
	perResource := func(n int) float64 {
		f := openFixture(t, t.TempDir(), staticOf(t))
		request := make([]AlterResource, n)
		for i := range request {
			request[i] = groupRes(fmt.Sprintf("group-%d", i), set(keyDeliveryCountLimit, "7"))
		}
		return float64(allocatedBy(func() { mustAlterAll(t, f.m, request) })) / float64(n)
	}
	small, large := perResource(500), perResource(8000)
	if large > 2*small {
		t.Fatalf("a request of 8000 resources allocates %.0f bytes per resource, one of 500 %.0f: "+
			"its cost grows faster than its size", large, small)
	}
	t.Logf("bytes allocated per resource: %.0f (500 resources), %.0f (8000)", small, large)
}
