package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// Overlay returns a file system that reads base and keeps every change in memory: files
// created, written, truncated, renamed or removed through it look changed through it, and base
// is never written. Syncs succeed without doing anything; OpenSyncer fails. Lock takes base's
// lock on a base file (a file that exists only in memory, or nowhere, is locked by nobody else),
// so that a dry run is refused where the real operation would be, instead of reading a log that
// another process is changing. It lets an operation that changes a log run as a dry run
// (repair-log without --yes) and report exactly what it would do.
func Overlay(base FS) FS {
	return &overlay{base: base, mem: map[string]*memData{}, hidden: map[string]bool{}, cut: map[string]int64{}}
}

type overlay struct {
	base FS

	mu     sync.Mutex
	mem    map[string]*memData // files held in memory: created here, or copied up from base
	hidden map[string]bool     // base files removed (or replaced by a file in mem)
	cut    map[string]int64    // base files truncated to a smaller size
}

// memData is the content of a file held in memory.
type memData struct {
	mu   sync.Mutex
	data []byte
}

// baseVisible reports whether name is a base file seen through the overlay; o.mu is held.
func (o *overlay) baseVisible(name string) (bool, error) {
	if o.hidden[name] {
		return false, nil
	}
	f, err := o.base.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

func (o *overlay) Create(name string) (File, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.mem[name]; ok {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	if ok, err := o.baseVisible(name); err != nil {
		return nil, err
	} else if ok {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	d := &memData{}
	o.mem[name] = d
	return &memFile{o: o, name: name, d: d}, nil
}

func (o *overlay) Open(name string) (File, error) { return o.open(name) }

func (o *overlay) OpenReadWrite(name string) (File, error) { return o.open(name) }

// open returns name as the overlay sees it; writes to a base file copy it into memory first.
func (o *overlay) open(name string) (File, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d, ok := o.mem[name]; ok {
		return &memFile{o: o, name: name, d: d}, nil
	}
	if o.hidden[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := o.base.Open(name)
	if err != nil {
		return nil, err
	}
	return &memFile{o: o, name: name, base: f}, nil
}

func (o *overlay) Remove(name string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.mem[name]; ok {
		delete(o.mem, name)
		o.hidden[name] = true // a base file it replaced stays gone
		return nil
	}
	ok, err := o.baseVisible(name)
	if err != nil {
		return err
	}
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	o.hidden[name] = true
	delete(o.cut, name)
	return nil
}

func (o *overlay) Rename(oldname, newname string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, ok := o.mem[oldname]
	if !ok {
		var err error
		if d, err = o.copyUp(oldname); err != nil {
			return err
		}
	}
	delete(o.mem, oldname)
	o.hidden[oldname] = true
	o.mem[newname] = d
	o.hidden[newname] = true
	delete(o.cut, newname)
	return nil
}

// copyUp reads the base file name, as the overlay sees it, into memory; o.mu is held.
func (o *overlay) copyUp(name string) (*memData, error) {
	if o.hidden[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := o.base.Open(name)
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if c, ok := o.cut[name]; ok && err == nil {
		size = min(size, c)
	}
	var data []byte
	if err == nil {
		data = make([]byte, size)
		_, err = f.ReadAt(data, 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("overlay: copy %s: %w", name, err)
	}
	return &memData{data: data}, nil
}

func (o *overlay) ReadDir(dir string) ([]string, error) {
	names, err := o.base.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	names = slices.DeleteFunc(names, func(n string) bool { return o.hidden[filepath.Join(dir, n)] })
	for p := range o.mem {
		if filepath.Dir(p) == filepath.Clean(dir) {
			names = append(names, filepath.Base(p))
		}
	}
	if err != nil && len(names) == 0 {
		return nil, err
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func (o *overlay) MkdirAll(dir string) error {
	if _, err := o.ReadDir(dir); err != nil {
		return fmt.Errorf("overlay: %s does not exist (directories are not created): %w", dir, err)
	}
	return nil
}

func (o *overlay) SyncDir(string) error { return nil }

func (o *overlay) Lock(name string) (io.Closer, error) {
	o.mu.Lock()
	_, inMem := o.mem[name]
	visible, err := o.baseVisible(name)
	o.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case inMem || !visible:
		return nopCloser{}, nil
	}
	// The file exists in base, so locking it there creates nothing. Only a lock that another
	// process holds refuses the dry run: a copy this process cannot open for locking (a
	// read-only mount of a backup, another user's files) is read as before.
	lock, err := o.base.Lock(name)
	if err != nil && !errors.Is(err, syscall.EWOULDBLOCK) {
		return nopCloser{}, nil
	}
	return lock, err
}

func (o *overlay) OpenSyncer(dir string) (Syncer, error) {
	return nil, fmt.Errorf("overlay: no file-system sync for %s", dir)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// memFile is a file seen through the overlay: in memory (d), or a base file read through
// base until something changes it.
type memFile struct {
	o    *overlay
	name string
	d    *memData
	base File
}

// memory returns the in-memory content, if the file is held in memory (perhaps copied up
// through another handle since this one was opened), or nil while it is read from base.
func (f *memFile) memory() *memData {
	if f.d == nil {
		f.o.mu.Lock()
		f.d = f.o.mem[f.name]
		f.o.mu.Unlock()
	}
	return f.d
}

// data returns the in-memory content, copying a base file up first.
func (f *memFile) data() (*memData, error) {
	if f.memory() != nil {
		return f.d, nil
	}
	f.o.mu.Lock()
	defer f.o.mu.Unlock()
	if d, ok := f.o.mem[f.name]; ok {
		f.d = d
		return d, nil
	}
	d, err := f.o.copyUp(f.name)
	if err != nil {
		return nil, err
	}
	f.o.mem[f.name] = d
	f.o.hidden[f.name] = true
	delete(f.o.cut, f.name)
	f.d = d
	return d, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.memory() == nil {
		size, err := f.Size()
		if err != nil {
			return 0, err
		}
		if off >= size {
			return 0, io.EOF
		}
		if rest := size - off; int64(len(p)) > rest {
			n, err := f.base.ReadAt(p[:rest], off)
			if err == nil {
				err = io.EOF
			}
			return n, err
		}
		return f.base.ReadAt(p, off)
	}
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	return bytes.NewReader(f.d.data).ReadAt(p, off)
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	d, err := f.data()
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(d.data)) {
		d.data = append(d.data, make([]byte, end-int64(len(d.data)))...)
	}
	return copy(d.data[off:], p), nil
}

func (f *memFile) Truncate(size int64) error {
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if f.memory() == nil {
		cur, err := f.Size()
		if err != nil {
			return err
		}
		if size <= cur {
			f.o.mu.Lock()
			f.o.cut[f.name] = size
			f.o.mu.Unlock()
			return nil
		}
	}
	d, err := f.data()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if size <= int64(len(d.data)) {
		d.data = d.data[:size]
	} else {
		d.data = append(d.data, make([]byte, size-int64(len(d.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	if f.memory() == nil {
		size, err := f.base.Size()
		if err != nil {
			return 0, err
		}
		f.o.mu.Lock()
		defer f.o.mu.Unlock()
		if c, ok := f.o.cut[f.name]; ok {
			size = min(size, c)
		}
		return size, nil
	}
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	return int64(len(f.d.data)), nil
}

func (f *memFile) Sync() error { return nil }

func (f *memFile) Close() error {
	if f.base != nil {
		return f.base.Close()
	}
	return nil
}
