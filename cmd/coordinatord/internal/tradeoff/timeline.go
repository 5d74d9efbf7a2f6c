package tradeoff

import (
	"sort"
	"sync"
	"time"
)

// timeline maps log offsets to the time they became durable, from samples of the log's end
// offset taken while writing.
type timeline struct {
	at  []time.Time
	end []int64 // non-decreasing
}

func (tl *timeline) add(t time.Time, end int64) {
	if n := len(tl.end); n > 0 && end < tl.end[n-1] {
		end = tl.end[n-1]
	}
	tl.at = append(tl.at, t)
	tl.end = append(tl.end, end)
}

// timeOf returns when offset x became durable: the first sample whose end offset passed x,
// interpolated linearly from the previous sample. Offsets outside the sampled range are clamped
// to its first or last sample.
func (tl *timeline) timeOf(x int64) time.Time {
	n := len(tl.end)
	if n == 0 {
		return time.Time{}
	}
	i := sort.Search(n, func(i int) bool { return tl.end[i] > x })
	switch {
	case i == 0:
		return tl.at[0]
	case i == n:
		return tl.at[n-1]
	}
	e0, e1 := tl.end[i-1], tl.end[i]
	frac := float64(x-e0) / float64(e1-e0)
	return tl.at[i-1].Add(time.Duration(frac * float64(tl.at[i].Sub(tl.at[i-1]))))
}

// sampler records a timeline of a log's end offset every interval until stopped.
type sampler struct {
	tl   timeline
	quit chan struct{}
	done sync.WaitGroup
}

func startSampler(end func() int64, every time.Duration) *sampler {
	s := &sampler{quit: make(chan struct{})}
	s.tl.add(time.Now(), end())
	s.done.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case now := <-t.C:
				s.tl.add(now, end())
			}
		}
	})
	return s
}

// stop ends the sampling with a last sample and returns the timeline.
func (s *sampler) stop(end func() int64) *timeline {
	close(s.quit)
	s.done.Wait()
	s.tl.add(time.Now(), end())
	return &s.tl
}
