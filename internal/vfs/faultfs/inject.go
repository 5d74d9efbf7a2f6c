package faultfs

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrInjected is the error injectors return when the test does not choose one.
var ErrInjected = errors.New("faultfs: injected error")

// Injector decides which operations fail. MaybeError is called before the operation is performed
// (after, for OpClose, so that descriptors are never leaked); a non-nil result fails the
// operation with that error (wrapped in an *fs.PathError) and the operation has no effect.
// Implementations must be safe for concurrent use.
type Injector interface {
	MaybeError(op Op) error
}

// AfterEffect wraps err so that the operation it fails takes effect before it reports err: a
// write that lands but reports an error, a sync that made the data durable yet reports a
// write-back error (one that another write's pages met, say). FS honours it for OpWrite, OpSync,
// OpTruncate and OpSyncFS; any other operation fails with it without effect. The error the
// operation returns wraps err.
func AfterEffect(err error) error { return afterEffect{err} }

type afterEffect struct{ err error }

func (a afterEffect) Error() string { return a.err.Error() + " (after taking effect)" }
func (a afterEffect) Unwrap() error { return a.err }

// InjectorFunc adapts a function to the Injector interface.
type InjectorFunc func(op Op) error

// MaybeError returns f(op).
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// IndexInjector fails exactly one operation: the one with a given index, counting from zero
// over the operations it is consulted about.
type IndexInjector struct {
	index int64
	err   error
	seen  atomic.Int64
	mu    sync.Mutex
	fired *Op
}

// OnIndex returns an injector that fails the index-th operation (0-based) with err, or with
// ErrInjected when err is nil, and lets every other operation through. Looping index over
// 0, 1, 2, ... until the workload completes without the injector firing exercises every
// failure point of the workload once.
func OnIndex(index int64, err error) *IndexInjector {
	if err == nil {
		err = ErrInjected
	}
	return &IndexInjector{index: index, err: err}
}

// MaybeError fails the operation if it is the chosen one.
func (ii *IndexInjector) MaybeError(op Op) error {
	if ii.seen.Add(1)-1 != ii.index {
		return nil
	}
	ii.mu.Lock()
	ii.fired = &op
	ii.mu.Unlock()
	return ii.err
}

// Fired reports whether the injector has failed an operation, and which.
func (ii *IndexInjector) Fired() (Op, bool) {
	ii.mu.Lock()
	defer ii.mu.Unlock()
	if ii.fired == nil {
		return Op{}, false
	}
	return *ii.fired, true
}

// Seen returns how many operations the injector has been consulted about.
func (ii *IndexInjector) Seen() int64 { return ii.seen.Load() }

// Predicate selects operations.
type Predicate func(op Op) bool

// OnKinds selects operations of the given kinds.
func OnKinds(kinds ...OpKind) Predicate {
	kinds = slices.Clone(kinds)
	return func(op Op) bool { return slices.Contains(kinds, op.Kind) }
}

// OnPath selects operations whose path, or its last element, matches the filepath.Match
// pattern, e.g. "*.seg". A malformed pattern matches nothing.
func OnPath(pattern string) Predicate {
	return func(op Op) bool {
		if ok, err := filepath.Match(pattern, op.Path); err == nil && ok {
			return true
		}
		ok, err := filepath.Match(pattern, filepath.Base(op.Path))
		return err == nil && ok
	}
}

// And selects operations that p and every other predicate select.
func (p Predicate) And(others ...Predicate) Predicate {
	return func(op Op) bool {
		if !p(op) {
			return false
		}
		for _, q := range others {
			if !q(op) {
				return false
			}
		}
		return true
	}
}

// Match returns an injector that fails every operation selected by p with err (ErrInjected
// when err is nil), e.g. Match(OnKinds(OpSync), syscall.EIO).
func Match(p Predicate, err error) Injector {
	if err == nil {
		err = ErrInjected
	}
	return InjectorFunc(func(op Op) error {
		if p(op) {
			return err
		}
		return nil
	})
}

// Any returns an injector that fails an operation with the error of the first of injectors
// that fails it. Every injector is consulted, so counting injectors keep counting.
func Any(injectors ...Injector) Injector {
	injectors = slices.Clone(injectors)
	return InjectorFunc(func(op Op) error {
		var first error
		for _, inj := range injectors {
			if err := inj.MaybeError(op); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}
