package groupcfg

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// TestLookupsDuringAlters runs Provider lookups, Broker, Effective and DescribeConfigs on several
// goroutines while another applies changes; under -race this checks the lock-free reads, and
// every value read must be one that was in force at some point.
func TestLookupsDuringAlters(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					if n == 0 {
						errs <- fmt.Errorf("reader %d never ran", r)
					}
					return
				default:
				}
				if v := f.m.SnapshotUpdateRecordsPerSnapshot("g"); !slices.Contains([]int{500, 300, 400, 700, 1000}, v) {
					errs <- fmt.Errorf("snapshot limit of g: %d", v)
					return
				}
				if v := f.m.SnapshotUpdateRecordsPerSnapshot("unset"); !slices.Contains([]int{500, 700, 1000}, v) {
					errs <- fmt.Errorf("snapshot limit of a group without override: %d", v)
					return
				}
				if v := f.m.groupInt("g", keyDeliveryCountLimit); v != 5 && v != 3 && v != 7 {
					errs <- fmt.Errorf("delivery count limit of g: %d", v)
					return
				}
				_ = f.m.groupInt("g", keyRecordLockDuration) + f.m.groupInt("g", keyRecordLocks) + f.m.groupInt("h", keySessionTimeout)
				_ = f.m.groupFlag("h", keyRenewAcknowledge) && f.m.groupFlag("g", keyAssignorOffload) && f.m.groupFlag("g", keyDeadLetterCopy)
				_ = f.m.groupText("g", keyAutoOffsetReset) + f.m.groupText("g", keyIsolationLevel) + f.m.groupText("g", keyDeadLetterTopicName)
				_ = f.m.Broker().SnapshotUpdateRecordsPerSnapshot() + len(f.m.Effective())
				_ = f.m.DescribeConfigs([]DescribeResource{{Type: ResourceGroup, Name: "g"}}, true, false)
			}
		}()
	}
	for i := range 60 {
		limit, ceiling, delivery := "300", "700", "3"
		if i%2 == 1 {
			limit, ceiling, delivery = "400", "1000", "7"
		}
		results := f.m.IncrementalAlterConfigs(context.Background(), []AlterResource{
			brokerRes(set(keySnapshotCeiling, ceiling)),
			groupRes("g", set(keyGroupSnapshotLimit, limit), set(keyDeliveryCountLimit, delivery)),
			groupRes(fmt.Sprintf("churn-%d", i%5), set(keyRenewAcknowledge, fmt.Sprint(i%2 == 0))),
		}, false)
		for _, res := range results {
			if res.ErrorCode != kafkaerr.None {
				t.Errorf("alter %d: %+v", i, res)
			}
		}
		if i%10 == 9 {
			f.mustAlter(t, groupRes("g", del(keyGroupSnapshotLimit), del(keyDeliveryCountLimit)))
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
