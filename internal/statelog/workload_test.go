package statelog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// workload drives a log through appends, segment rolls, start-offset moves and a reopen, and
// keeps the model of what has been acknowledged. It stops at the first error.
type workload struct {
	dir   string
	opts  Options
	seed  uint64
	steps int

	model [][]byte // acknowledged records, by offset
	start int64    // acknowledged log-start offset

	// The operation in progress; after a failure, the one that failed.
	inflight      [][]byte // batch being appended, nil if none
	inflightStart int64    // start offset being set, -1 if none

	errs []error // errors returned by the log
}

func newWorkload(seed uint64, opts Options) *workload {
	return &workload{dir: "/data/log", opts: opts, seed: seed, steps: 40, inflightStart: -1}
}

// ackState is what had been acknowledged at some moment, plus what was in flight.
type ackState struct {
	model         [][]byte
	start         int64
	inflight      [][]byte
	inflightStart int64
}

func (w *workload) snapshot() ackState {
	return ackState{model: w.model[:len(w.model):len(w.model)], start: w.start, inflight: w.inflight, inflightStart: w.inflightStart}
}

// run executes the workload; it reports whether every step completed without error.
func (w *workload) run(logger *zap.Logger) (ok bool) {
	rng := rand.New(rand.NewPCG(w.seed, 0x5eed))
	l, err := Open(logger, w.dir, w.opts)
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("open: %w", err))
		return false
	}
	defer func() {
		if err := l.Close(); err != nil {
			w.errs = append(w.errs, fmt.Errorf("close: %w", err))
			ok = false
		}
	}()
	for step := range w.steps {
		if step == w.steps/2 {
			// Restart half-way, so recovery runs inside the workload too.
			if err := l.Close(); err != nil {
				w.errs = append(w.errs, fmt.Errorf("close: %w", err))
				return false
			}
			if l, err = Open(logger, w.dir, w.opts); err != nil {
				w.errs = append(w.errs, fmt.Errorf("reopen: %w", err))
				l = &Log{closed: true}
				return false
			}
		}
		if rng.IntN(5) == 0 {
			end := int64(len(w.model))
			off := w.start + rng.Int64N(end-w.start+1)
			w.inflightStart = off
			if err := l.SetStartOffset(off); err != nil {
				w.errs = append(w.errs, fmt.Errorf("set start offset %d: %w", off, err))
				w.checkSticky(l)
				return false
			}
			// Segment files are deleted in the background; waiting for that keeps the
			// filesystem operations in the same order on every run, so that the fault and
			// crash tests can name one by its index.
			l.remover.wait()
			w.start = max(w.start, off)
			w.inflightStart = -1
			continue
		}
		batch := makeBatch(rng, 1+rng.IntN(6), 0, 120)
		w.inflight = batch
		first, err := l.Append(batch)
		if err != nil {
			w.errs = append(w.errs, fmt.Errorf("append: %w", err))
			w.checkSticky(l)
			return false
		}
		if first != int64(len(w.model)) {
			w.errs = append(w.errs, fmt.Errorf("append returned offset %d, want %d", first, len(w.model)))
			return false
		}
		w.model = append(w.model, batch...)
		w.inflight = nil
	}
	return true
}

// checkSticky records an error if the log accepts an append after a failure.
func (w *workload) checkSticky(l *Log) {
	if _, err := l.Append([][]byte{[]byte("after failure")}); !errors.Is(err, ErrFailed) {
		w.errs = append(w.errs, fmt.Errorf("append after a failure returned %v, want ErrFailed", err))
	}
}

// verify opens the log on fsys and checks that it holds exactly the acknowledged records,
// plus at most the batch in flight, whole, with the acknowledged (or in-flight) start offset.
func verifyAcked(t *testing.T, fsys FS, dir string, opts Options, st ackState) {
	t.Helper()
	opts.FS = fsys
	l, err := Open(zaptest.NewLogger(t), dir, opts)
	if err != nil {
		t.Fatalf("reopen after failure: %v", err)
	}
	defer l.Close()
	expected := st.model
	switch end := l.EndOffset(); {
	case end == int64(len(st.model)):
	case st.inflight != nil && end == int64(len(st.model)+len(st.inflight)):
		expected = append(st.model, st.inflight...)
	default:
		t.Fatalf("reopened log ends at %d; acknowledged %d records, %d in flight", end, len(st.model), len(st.inflight))
	}
	start := l.StartOffset()
	if start != st.start && start != st.inflightStart {
		t.Fatalf("reopened log starts at %d; acknowledged %d, in flight %d", start, st.start, st.inflightStart)
	}
	checkRecords(t, readAll(t, l, start), want(expected, start))
	// The recovered log accepts appends.
	if _, err := l.Append([][]byte{[]byte("after recovery")}); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
}
