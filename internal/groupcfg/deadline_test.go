package groupcfg

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// expiringContext is a context whose deadline passes once its Err has been asked n times.
type expiringContext struct {
	context.Context
	n atomic.Int64
}

func (c *expiringContext) Err() error {
	if c.n.Add(-1) < 0 {
		return context.DeadlineExceeded
	}
	return nil
}

// TestDeadlinePassedNotApplied: a request whose deadline passed before its changes are applied,
// already when it arrives, while it waits for another change, or while it is validated, changes
// nothing and says so for each resource.
func TestDeadlinePassedNotApplied(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	request := []AlterResource{groupRes("g", set(keyDeliveryCountLimit, "7")), brokerRes(set(keySnapshotCeiling, "700"))}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(name string, results []AlterResult, want string) {
		t.Helper()
		for _, r := range results {
			if r.ErrorCode != kafkaerr.RequestTimedOut || !strings.Contains(r.ErrorMessage, want) ||
				!strings.Contains(r.ErrorMessage, "nothing was changed") {
				t.Fatalf("%s: %+v, want REQUEST_TIMED_OUT saying %q and that nothing was changed", name, r, want)
			}
		}
		if f.m.groupInt("g", keyDeliveryCountLimit) != 5 || f.m.Broker().SnapshotUpdateRecordsPerSnapshot() != 500 ||
			readStore(t, f.dir).Generation != 1 {
			t.Fatalf("%s: the request was applied", name)
		}
	}
	check("cancelled", f.m.IncrementalAlterConfigs(expired, request, false), "cancelled")

	deadline, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	check("deadline passed on arrival", f.m.IncrementalAlterConfigs(deadline, request, false), "deadline passed")

	// Another change holds the admin lock past the deadline.
	f.m.admin <- struct{}{}
	waiting, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	results := f.m.IncrementalAlterConfigs(waiting, request, false)
	<-f.m.admin
	check("deadline passed while waiting", results, "deadline passed")

	// The deadline passes once the lock is taken (its Err was asked once), while the request is
	// validated.
	late := &expiringContext{Context: context.Background()}
	late.n.Store(1)
	check("deadline passed while validating", f.m.IncrementalAlterConfigs(late, request, false), "deadline passed")

	// With time left, the same request applies.
	mustAlterAll(t, f.m, request)
	if f.m.groupInt("g", keyDeliveryCountLimit) != 7 {
		t.Fatal("the request did not apply with time left")
	}
}

// In a cluster, a request whose deadline passed before its change is proposed is not proposed.
func TestReplicatedDeadlinePassedNotProposed(t *testing.T) {
	c := newFakeCluster(t, 2)
	deadline, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	r := c.managers[0].IncrementalAlterConfigs(deadline, []AlterResource{groupRes("g1", set(keyDeliveryCountLimit, "7"))}, false)[0]
	if r.ErrorCode != kafkaerr.RequestTimedOut || !strings.Contains(r.ErrorMessage, "deadline passed") || len(c.log) != 0 {
		t.Fatalf("alter after its deadline: %+v, %d changes proposed", r, len(c.log))
	}
	// The request's deadline bounds the commit, when it comes before the propose timeout.
	soon, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	want, _ := soon.Deadline()
	if r := c.managers[0].IncrementalAlterConfigs(soon, []AlterResource{groupRes("g1", set(keyDeliveryCountLimit, "7"))}, false)[0]; r.ErrorCode != kafkaerr.None {
		t.Fatalf("alter: %+v", r)
	}
	if !c.deadline.Equal(want) {
		t.Fatalf("the change was proposed with the deadline %v, want the request's %v", c.deadline, want)
	}
}
