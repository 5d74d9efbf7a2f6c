package groupcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
)

// memFS is an in-memory fileSystem that models what a crash leaves behind and injects faults.
//
// Each file is an inode with its current bytes and the bytes its last Sync made durable. Each
// directory has its live entries and the entries its last SyncDir made durable. A process crash
// (kill -9) keeps everything live (the page cache survives): reopen on the same memFS. A power
// cut keeps only what was synced: reopen on PowerCut().
//
// Faults: operation number failAt (counting from 1 over every call) returns errInjected, and
// when dieAtFault is set every later operation fails too, as if the process had died there.
type memFS struct {
	mu         sync.Mutex
	dirs       map[string]*memDir
	ops        int
	failAt     int
	dieAtFault bool
	dead       bool
	failOps    map[string]error // op name ("sync", "syncdir", "write", ...) → error, every time
}

type memDir struct {
	live    map[string]*memInode
	durable map[string]*memInode
}

type memInode struct {
	data   []byte
	synced []byte
}

var errInjected = fmt.Errorf("injected fault: %w", syscall.EIO)

func newMemFS() *memFS { return &memFS{dirs: map[string]*memDir{}} }

// step counts one operation and returns the injected error for it, if any.
func (m *memFS) step(op string) error {
	m.ops++
	if m.dead {
		return errInjected
	}
	if m.failAt > 0 && m.ops == m.failAt {
		if m.dieAtFault {
			m.dead = true
		}
		return errInjected
	}
	if err, ok := m.failOps[op]; ok {
		return err
	}
	return nil
}

// revive clears every fault, as a restarted process would see the disk.
func (m *memFS) revive() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAt, m.dieAtFault, m.dead, m.failOps = 0, false, false, nil
}

// failFrom makes operation number ops+n (n ≥ 1) fail, and everything after it when die is set.
func (m *memFS) failFrom(n int, die bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAt, m.dieAtFault = m.ops+n, die
}

func (m *memFS) dir(path string) (*memDir, error) {
	d, ok := m.dirs[filepath.Clean(path)]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return d, nil
}

func (m *memFS) MkdirAll(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step("mkdir"); err != nil {
		return err
	}
	// Directories themselves are modelled as always durable; file entries are not.
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, ok := m.dirs[p]; !ok {
			m.dirs[p] = &memDir{live: map[string]*memInode{}, durable: map[string]*memInode{}}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func (m *memFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step("read"); err != nil {
		return nil, err
	}
	d, err := m.dir(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	ino, ok := d.live[filepath.Base(name)]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return append([]byte(nil), ino.data...), nil
}

func (m *memFS) Create(name string) (file, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step("create"); err != nil {
		return nil, err
	}
	d, err := m.dir(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	ino, ok := d.live[filepath.Base(name)]
	if !ok {
		ino = &memInode{}
		d.live[filepath.Base(name)] = ino
	}
	ino.data = nil
	return &memFile{fs: m, ino: ino}, nil
}

func (m *memFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step("rename"); err != nil {
		return err
	}
	od, err := m.dir(filepath.Dir(oldname))
	if err != nil {
		return err
	}
	nd, err := m.dir(filepath.Dir(newname))
	if err != nil {
		return err
	}
	ino, ok := od.live[filepath.Base(oldname)]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(od.live, filepath.Base(oldname))
	nd.live[filepath.Base(newname)] = ino
	return nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step("remove"); err != nil {
		return err
	}
	d, err := m.dir(filepath.Dir(name))
	if err != nil {
		return err
	}
	if _, ok := d.live[filepath.Base(name)]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(d.live, filepath.Base(name))
	return nil
}

func (m *memFS) SyncDir(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step("syncdir"); err != nil {
		return err
	}
	d, err := m.dir(path)
	if err != nil {
		return err
	}
	d.durable = make(map[string]*memInode, len(d.live))
	for name, ino := range d.live {
		d.durable[name] = ino
	}
	return nil
}

// PowerCut returns the filesystem a power cut leaves: only synced directory entries, each file
// with its synced bytes. With rng, each file whose current bytes were not all synced keeps a
// random prefix of them instead (a torn write), as some filesystems do.
func (m *memFS) PowerCut(rng *rand.Rand) *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := newMemFS()
	copied := map[*memInode]*memInode{}
	for path, d := range m.dirs {
		nd := &memDir{live: map[string]*memInode{}, durable: map[string]*memInode{}}
		for name, ino := range d.durable {
			c, ok := copied[ino]
			if !ok {
				data := append([]byte(nil), ino.synced...)
				if rng != nil && string(ino.data) != string(ino.synced) {
					data = append([]byte(nil), ino.data[:rng.IntN(len(ino.data)+1)]...)
				}
				c = &memInode{data: data, synced: append([]byte(nil), data...)}
				copied[ino] = c
			}
			nd.live[name], nd.durable[name] = c, c
		}
		out.dirs[path] = nd
	}
	return out
}

// names lists the live entries of a directory.
func (m *memFS) names(path string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dir(path)
	if err != nil {
		return nil
	}
	var out []string
	for name := range d.live {
		out = append(out, name)
	}
	return out
}

type memFile struct {
	fs     *memFS
	ino    *memInode
	closed bool
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step("write"); err != nil {
		return 0, err
	}
	if f.closed {
		return 0, errors.New("write on closed file")
	}
	f.ino.data = append(f.ino.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step("sync"); err != nil {
		return err
	}
	f.ino.synced = append([]byte(nil), f.ino.data...)
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}
