package statelog

import (
	"testing"
	"time"
)

// BenchmarkSetStartOffset measures how long the owner waits when a move of the log-start
// offset drops a full segment of the default 100 MiB (set-ms), and how long until its file is
// gone (deleted-ms, up to the end of the Close that follows). Each iteration fills a fresh log
// with 1 MiB records until the first segment is sealed; the filling is not timed.
func BenchmarkSetStartOffset(b *testing.B) {
	record := make([]byte, 1<<20)
	var set, deleted time.Duration
	for range b.N {
		b.StopTimer()
		l, err := Open(nil, b.TempDir(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		for len(l.segments) < 2 {
			if _, err := l.Append([][]byte{record}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		began := time.Now()
		if err := l.SetStartOffset(l.EndOffset()); err != nil {
			b.Fatal(err)
		}
		set += time.Since(began)
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		deleted += time.Since(began)
	}
	b.ReportMetric(float64(set.Microseconds())/1e3/float64(b.N), "set-ms")
	b.ReportMetric(float64(deleted.Microseconds())/1e3/float64(b.N), "deleted-ms")
}
