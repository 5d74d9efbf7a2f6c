package groupcfg

import (
	"context"
	"fmt"
	"testing"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

// BenchmarkSnapshotLimitLookup measures the Provider lookup the shards make for every record
// they choose, for groups with and without an override, among many groups.
func BenchmarkSnapshotLimitLookup(b *testing.B) {
	for _, groups := range []int{1, 10000} {
		f := openFixture(b, b.TempDir(), staticOf(b))
		resources := make([]AlterResource, groups)
		ids := make([]string, groups)
		for i := range groups {
			ids[i] = fmt.Sprintf("group-%d", i)
			resources[i] = groupRes(ids[i], set(keyGroupSnapshotLimit, "300"))
		}
		for _, res := range f.m.IncrementalAlterConfigs(context.Background(), resources, false) {
			if res.ErrorCode != kafkaerr.None {
				b.Fatal(res.ErrorMessage)
			}
		}
		for _, override := range []bool{true, false} {
			id := ids[groups/2]
			if !override {
				id = "no-override"
			}
			b.Run(fmt.Sprintf("groups=%d/override=%v", groups, override), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if f.m.SnapshotUpdateRecordsPerSnapshot(id) < snapshotFloor {
						b.Fatal("limit below the floor")
					}
				}
			})
			b.Run(fmt.Sprintf("groups=%d/override=%v/parallel", groups, override), func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if f.m.SnapshotUpdateRecordsPerSnapshot(id) < snapshotFloor {
							b.Error("limit below the floor")
							return
						}
					}
				})
			})
		}
	}
}

// storeGroups writes a store holding n groups with an override each (group-0 ... group-<n-1>)
// into dir, as a server that stored them earlier leaves it, and returns a Manager opened on it.
func storeGroups(b testing.TB, dir string, n int) *fixture {
	b.Helper()
	f := openFixture(b, dir, staticOf(b))
	if err := f.m.Close(); err != nil {
		b.Fatal(err)
	}
	rewriteStore(b, dir, func(st *storeState) {
		if st.Groups == nil {
			st.Groups = map[string]map[string]string{}
		}
		for i := range n {
			st.Groups[fmt.Sprintf("group-%d", i)] = map[string]string{keyDeliveryCountLimit: "7"}
		}
	})
	return openFixture(b, dir, staticOf(b))
}

// mustAlterAll applies resources and fails unless every one succeeds.
func mustAlterAll(tb testing.TB, m *Manager, resources []AlterResource) {
	tb.Helper()
	for _, res := range m.IncrementalAlterConfigs(context.Background(), resources, false) {
		if res.ErrorCode != kafkaerr.None {
			tb.Fatalf("alter %s %q: %s %s", res.Type, res.Name, res.ErrorCode, res.ErrorMessage)
		}
	}
}

// BenchmarkAlterGroups measures one request that changes groups stored groups, each one key:
// its cost should grow linearly with the request.
func BenchmarkAlterGroups(b *testing.B) {
	for _, groups := range []int{1000, 2000, 4000, 8000, 16000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			f := storeGroups(b, b.TempDir(), groups)
			var requests [2][]AlterResource
			for v := range requests {
				for i := range groups {
					requests[v] = append(requests[v], groupRes(fmt.Sprintf("group-%d", i), set(keyDeliveryCountLimit, fmt.Sprint(8+v))))
				}
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				mustAlterAll(b, f.m, requests[n%2])
				n++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*groups), "ns/resource")
		})
	}
}

// BenchmarkOneGroupChange measures one durable change of one group's override with many other
// groups stored: its cost should not depend on them.
func BenchmarkOneGroupChange(b *testing.B) {
	for _, stored := range []int{0, 1000, 10000, 100000} {
		b.Run(fmt.Sprintf("stored=%d", stored), func(b *testing.B) {
			f := storeGroups(b, b.TempDir(), stored)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				f.mustAlter(b, groupRes("hot", set(keyDeliveryCountLimit, fmt.Sprint(2+n%8))))
			}
		})
	}
}
