package faultfs

import (
	"errors"
	"io"
	"io/fs"
	"sync/atomic"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// FS wraps a vfs.FS and fails the operations its current Injector chooses. It counts every
// operation it is asked to perform, whether or not an injector is installed.
type FS struct {
	inner vfs.FS
	inj   atomic.Pointer[injectorBox]
	ops   atomic.Int64
}

type injectorBox struct{ inj Injector }

var _ vfs.FS = (*FS)(nil)

// Wrap returns an FS that performs operations on inner and consults inj (nil: none) first.
func Wrap(inner vfs.FS, inj Injector) *FS {
	f := &FS{inner: inner}
	f.SetInjector(inj)
	return f
}

// SetInjector replaces the injector; nil switches injection off. Operations already past
// their check are not affected.
func (f *FS) SetInjector(inj Injector) {
	if inj == nil {
		f.inj.Store(nil)
		return
	}
	f.inj.Store(&injectorBox{inj: inj})
}

// Ops returns how many operations the FS has been asked to perform so far.
func (f *FS) Ops() int64 { return f.ops.Load() }

func (f *FS) check(kind OpKind, path string) error {
	f.ops.Add(1)
	b := f.inj.Load()
	if b == nil {
		return nil
	}
	if err := b.inj.MaybeError(Op{Kind: kind, Path: path}); err != nil {
		return &fs.PathError{Op: kind.String(), Path: path, Err: err}
	}
	return nil
}

// perform runs op unless the injector fails it; an AfterEffect failure runs op first and
// discards its result.
func (f *FS) perform(kind OpKind, path string, op func() error) error {
	err := f.check(kind, path)
	if err == nil {
		return op()
	}
	var ae afterEffect
	if errors.As(err, &ae) {
		_ = op()
	}
	return err
}

// Create implements vfs.FS.
func (f *FS) Create(name string) (vfs.File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Create(name)
	return f.wrap(name, file, err)
}

// Open implements vfs.FS.
func (f *FS) Open(name string) (vfs.File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Open(name)
	return f.wrap(name, file, err)
}

// OpenReadWrite implements vfs.FS.
func (f *FS) OpenReadWrite(name string) (vfs.File, error) {
	if err := f.check(OpOpenReadWrite, name); err != nil {
		return nil, err
	}
	file, err := f.inner.OpenReadWrite(name)
	return f.wrap(name, file, err)
}

func (f *FS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, f: file, path: name}, nil
}

// Remove implements vfs.FS.
func (f *FS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// Rename implements vfs.FS.
func (f *FS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, oldname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// ReadDir implements vfs.FS.
func (f *FS) ReadDir(dir string) ([]string, error) {
	if err := f.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(dir)
}

// MkdirAll implements vfs.FS.
func (f *FS) MkdirAll(dir string) error {
	if err := f.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

// SyncDir implements vfs.FS.
func (f *FS) SyncDir(dir string) error {
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// Lock implements vfs.FS. Releasing the lock is an OpClose on name.
func (f *FS) Lock(name string) (io.Closer, error) {
	if err := f.check(OpLock, name); err != nil {
		return nil, err
	}
	l, err := f.inner.Lock(name)
	if err != nil {
		return nil, err
	}
	return &faultLock{fs: f, l: l, path: name}, nil
}

// OpenSyncer implements vfs.FS. The syncer's Sync is an OpSyncFS on dir, Holds an OpStat of
// the directory asked about, and Close an OpClose on dir.
func (f *FS) OpenSyncer(dir string) (vfs.Syncer, error) {
	if err := f.check(OpOpenSyncer, dir); err != nil {
		return nil, err
	}
	s, err := f.inner.OpenSyncer(dir)
	if err != nil {
		return nil, err
	}
	return &faultSyncer{fs: f, s: s, path: dir}, nil
}

type faultSyncer struct {
	fs   *FS
	s    vfs.Syncer
	path string
}

func (s *faultSyncer) Sync() error { return s.fs.perform(OpSyncFS, s.path, s.s.Sync) }

func (s *faultSyncer) Holds(dir string) (bool, error) {
	if err := s.fs.check(OpStat, dir); err != nil {
		return false, err
	}
	return s.s.Holds(dir)
}

func (s *faultSyncer) Close() error {
	err := s.s.Close()
	if ierr := s.fs.check(OpClose, s.path); err == nil {
		err = ierr
	}
	return err
}

type faultLock struct {
	fs   *FS
	l    io.Closer
	path string
}

func (l *faultLock) Close() error {
	err := l.l.Close()
	if ierr := l.fs.check(OpClose, l.path); err == nil {
		err = ierr
	}
	return err
}

type faultFile struct {
	fs   *FS
	f    vfs.File
	path string
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.fs.check(OpRead, ff.path); err != nil {
		return 0, err
	}
	return ff.f.ReadAt(p, off)
}

func (ff *faultFile) WriteAt(p []byte, off int64) (n int, err error) {
	err = ff.fs.perform(OpWrite, ff.path, func() error {
		n, err = ff.f.WriteAt(p, off)
		return err
	})
	return n, err
}

func (ff *faultFile) Sync() error { return ff.fs.perform(OpSync, ff.path, ff.f.Sync) }

func (ff *faultFile) Truncate(size int64) error {
	return ff.fs.perform(OpTruncate, ff.path, func() error { return ff.f.Truncate(size) })
}

func (ff *faultFile) Size() (int64, error) {
	if err := ff.fs.check(OpSize, ff.path); err != nil {
		return 0, err
	}
	return ff.f.Size()
}

// Close always closes the underlying file, then reports an injected error if there is one.
func (ff *faultFile) Close() error {
	err := ff.f.Close()
	if ierr := ff.fs.check(OpClose, ff.path); err == nil {
		err = ierr
	}
	return err
}
