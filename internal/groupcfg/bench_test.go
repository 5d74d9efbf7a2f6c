package groupcfg

import (
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
		for _, res := range f.m.IncrementalAlterConfigs(resources, false) {
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

// BenchmarkGroupAlter measures one durable group change (two fsyncs) with many groups stored.
func BenchmarkGroupAlter(b *testing.B) {
	for _, groups := range []int{1, 10000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			f := openFixture(b, b.TempDir(), staticOf(b))
			resources := make([]AlterResource, groups)
			for i := range groups {
				resources[i] = groupRes(fmt.Sprintf("group-%d", i), set(keyDeliveryCountLimit, "7"))
			}
			f.m.IncrementalAlterConfigs(resources, false)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				f.mustAlter(b, groupRes("hot", set(keyDeliveryCountLimit, fmt.Sprint(2+n%8))))
			}
		})
	}
}
