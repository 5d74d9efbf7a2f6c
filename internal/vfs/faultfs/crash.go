package faultfs

import (
	"bytes"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// CrashFS is an in-memory vfs.FS that tracks durability the way a POSIX filesystem promises
// it: a file's bytes are durable once File.Sync returns, a directory entry (creation, rename,
// removal) once SyncDir of its directory returns. CrashClone produces what a power cut would
// leave behind. Paths are cleaned and taken relative to the filesystem's root, so "/a/b" and
// "a/b" name the same file. The zero value is not usable; call NewCrashFS.
type CrashFS struct {
	mu    sync.Mutex
	root  *node
	locks map[string]bool
}

var _ vfs.FS = (*CrashFS)(nil)

// CrashOptions choose what survives a simulated power cut besides the synced state.
type CrashOptions struct {
	// Rand, when set, lets a random part of the unsynced state survive: for each file that
	// has only been appended to since its last Sync, a random prefix of the appended bytes
	// (a file rewritten or truncated since its last Sync keeps either its synced or its
	// current content, at random), and for each directory a random prefix, in order, of the
	// entry operations since its last SyncDir (so a rename survives whole or not at all).
	// When nil, exactly the synced state survives.
	Rand *rand.Rand
	// ZeroFill makes the surviving unsynced bytes of a file read as zeros, as when a file's
	// new size reaches the disk before its data.
	ZeroFill bool
}

// node is a file or a directory.
type node struct {
	isDir bool

	// Directory state.
	entries map[string]*node // current entries
	durable map[string]*node // entries as of the last SyncDir
	pending []dirOp          // entry changes since the last SyncDir, in order

	// File state.
	data       []byte // current content
	synced     []byte // content as of the last Sync
	shared     bool   // data and synced share a backing array
	appendOnly bool   // data is synced followed by bytes written since the last Sync
}

// dirOp is one change of a directory's entries; a rename is one dirOp.
type dirOp struct {
	remove string // entry removed, "" if none
	add    string // entry added or replaced, "" if none
	node   *node  // the node added
}

// NewCrashFS returns an empty CrashFS whose root directory exists and is durable.
func NewCrashFS() *CrashFS {
	return &CrashFS{root: newDirNode(), locks: make(map[string]bool)}
}

func newDirNode() *node {
	return &node{isDir: true, entries: make(map[string]*node), durable: make(map[string]*node)}
}

func newFileNode() *node { return &node{appendOnly: true} }

// CrashClone returns a new CrashFS holding the state a power cut at this moment would leave:
// the durable state, plus what opts lets survive. Everything in the clone is durable. c is
// unchanged and stays usable; files open on c are not open on the clone.
func (c *CrashFS) CrashClone(opts CrashOptions) *CrashFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &CrashFS{root: c.root.crashClone(opts), locks: make(map[string]bool)}
}

func (n *node) crashClone(opts CrashOptions) *node {
	entries := maps.Clone(n.durable)
	if opts.Rand != nil {
		for _, op := range n.pending[:opts.Rand.IntN(len(n.pending)+1)] {
			if op.remove != "" {
				delete(entries, op.remove)
			}
			if op.add != "" {
				entries[op.add] = op.node
			}
		}
	}
	out := newDirNode()
	// Sorted, so that a seeded Rand gives the same clone every time.
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		child := entries[name]
		var cc *node
		if child.isDir {
			cc = child.crashClone(opts)
		} else {
			content := child.crashContent(opts)
			cc = &node{data: content, synced: content[:len(content):len(content)], shared: true, appendOnly: true}
		}
		out.entries[name] = cc
		out.durable[name] = cc
	}
	return out
}

func (n *node) crashContent(opts CrashOptions) []byte {
	if opts.Rand == nil {
		return bytes.Clone(n.synced)
	}
	if !n.appendOnly {
		if opts.Rand.IntN(2) == 0 {
			return bytes.Clone(n.synced)
		}
		return bytes.Clone(n.data)
	}
	keep := opts.Rand.IntN(len(n.data) - len(n.synced) + 1)
	out := make([]byte, len(n.synced)+keep)
	copy(out, n.synced)
	if !opts.ZeroFill {
		copy(out[len(n.synced):], n.data[len(n.synced):])
	}
	return out
}

// write stores p at off, growing the file (with zeros over any hole) as needed.
func (n *node) write(p []byte, off int) {
	n.resize(max(len(n.data), off+len(p)))
	if len(p) > 0 {
		n.touch(off)
		copy(n.data[off:], p)
	}
}

// resize changes the file's length; new bytes are zero.
func (n *node) resize(size int) {
	old := len(n.data)
	switch {
	case size < old:
		if size < len(n.synced) {
			n.appendOnly = false
		}
		n.data = n.data[:size]
	case size > old:
		n.touch(old)
		if size > cap(n.data) {
			grown := make([]byte, size, max(size, 2*cap(n.data)))
			copy(grown, n.data)
			n.data = grown
			n.shared = false
			return
		}
		n.data = n.data[:size]
		clear(n.data[old:])
	}
}

// touch prepares bytes from index from on for modification: bytes of the synced content are
// copied away first so that the synced state is preserved.
func (n *node) touch(from int) {
	if from >= len(n.synced) {
		return
	}
	n.appendOnly = false
	if n.shared {
		n.data = bytes.Clone(n.data)
		n.shared = false
	}
}

func (n *node) sync() {
	n.synced = n.data[:len(n.data):len(n.data)]
	n.shared = true
	n.appendOnly = true
}

func (n *node) set(name string, child *node) {
	n.entries[name] = child
	n.pending = append(n.pending, dirOp{add: name, node: child})
}

func (n *node) unset(name string) {
	delete(n.entries, name)
	n.pending = append(n.pending, dirOp{remove: name})
}

func (n *node) syncEntries() {
	n.durable = maps.Clone(n.entries)
	n.pending = nil
}

// parts splits a path into its elements; the root has none.
func parts(name string) ([]string, error) {
	p := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(name)), "/")
	if p == "." || p == "" {
		return nil, nil
	}
	elems := strings.Split(p, "/")
	if slices.Contains(elems, "..") {
		return nil, fs.ErrInvalid
	}
	return elems, nil
}

// lookup returns the node at name. Callers hold c.mu.
func (c *CrashFS) lookup(op, name string) (*node, error) {
	elems, err := parts(name)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	n := c.root
	for _, e := range elems {
		if !n.isDir {
			return nil, &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
		}
		child, ok := n.entries[e]
		if !ok {
			return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		n = child
	}
	return n, nil
}

// parent returns the directory holding name and name's last element. Callers hold c.mu.
func (c *CrashFS) parent(op, name string) (*node, string, error) {
	elems, err := parts(name)
	if err == nil && len(elems) == 0 {
		err = fs.ErrInvalid
	}
	if err != nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: err}
	}
	dir, err := c.lookup(op, strings.Join(elems[:len(elems)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
	}
	return dir, elems[len(elems)-1], nil
}

// Create implements vfs.FS.
func (c *CrashFS) Create(name string) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir, base, err := c.parent("create", name)
	if err != nil {
		return nil, err
	}
	if _, ok := dir.entries[base]; ok {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	n := newFileNode()
	dir.set(base, n)
	return &crashFile{fs: c, n: n, path: name, writable: true}, nil
}

// Open implements vfs.FS.
func (c *CrashFS) Open(name string) (vfs.File, error) { return c.open("open", name, false) }

// OpenReadWrite implements vfs.FS.
func (c *CrashFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.open("open-read-write", name, true)
}

func (c *CrashFS) open(op, name string, writable bool) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.lookup(op, name)
	if err != nil {
		return nil, err
	}
	if n.isDir {
		return nil, &fs.PathError{Op: op, Path: name, Err: syscall.EISDIR}
	}
	return &crashFile{fs: c, n: n, path: name, writable: writable}, nil
}

// Remove implements vfs.FS.
func (c *CrashFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir, base, err := c.parent("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.entries[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.isDir && len(n.entries) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	dir.unset(base)
	return nil
}

// Rename implements vfs.FS. Both names must be in the same directory.
func (c *CrashFS) Rename(oldname, newname string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir, oldBase, err := c.parent("rename", oldname)
	if err != nil {
		return err
	}
	newDir, newBase, err := c.parent("rename", newname)
	if err != nil {
		return err
	}
	if dir != newDir {
		return &fs.PathError{Op: "rename", Path: newname, Err: syscall.EXDEV}
	}
	n, ok := dir.entries[oldBase]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	if target, ok := dir.entries[newBase]; ok && target.isDir {
		return &fs.PathError{Op: "rename", Path: newname, Err: syscall.EISDIR}
	}
	if oldBase == newBase {
		return nil
	}
	delete(dir.entries, oldBase)
	dir.entries[newBase] = n
	dir.pending = append(dir.pending, dirOp{remove: oldBase, add: newBase, node: n})
	return nil
}

// ReadDir implements vfs.FS.
func (c *CrashFS) ReadDir(name string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.lookup("read-dir", name)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &fs.PathError{Op: "read-dir", Path: name, Err: syscall.ENOTDIR}
	}
	return slices.Sorted(maps.Keys(n.entries)), nil
}

// MkdirAll implements vfs.FS.
func (c *CrashFS) MkdirAll(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	elems, err := parts(name)
	if err != nil {
		return &fs.PathError{Op: "mkdir-all", Path: name, Err: err}
	}
	n := c.root
	for _, e := range elems {
		child, ok := n.entries[e]
		if !ok {
			child = newDirNode()
			n.set(e, child)
		} else if !child.isDir {
			return &fs.PathError{Op: "mkdir-all", Path: name, Err: syscall.ENOTDIR}
		}
		n = child
	}
	return nil
}

// SyncDir implements vfs.FS.
func (c *CrashFS) SyncDir(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.lookup("sync-dir", name)
	if err != nil {
		return err
	}
	if !n.isDir {
		return &fs.PathError{Op: "sync-dir", Path: name, Err: syscall.ENOTDIR}
	}
	n.syncEntries()
	return nil
}

// Lock implements vfs.FS. Locks are held in memory and do not survive CrashClone.
func (c *CrashFS) Lock(name string) (io.Closer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir, base, err := c.parent("lock", name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.entries[base]
	switch {
	case !ok:
		dir.set(base, newFileNode())
	case n.isDir:
		return nil, &fs.PathError{Op: "lock", Path: name, Err: syscall.EISDIR}
	}
	key := filepath.Clean(strings.TrimPrefix(filepath.ToSlash(name), "/"))
	if c.locks[key] {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: syscall.EWOULDBLOCK}
	}
	c.locks[key] = true
	return &crashLock{fs: c, key: key}, nil
}

type crashLock struct {
	fs       *CrashFS
	key      string
	released bool
}

func (l *crashLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.released {
		return &fs.PathError{Op: "unlock", Path: l.key, Err: fs.ErrClosed}
	}
	l.released = true
	delete(l.fs.locks, l.key)
	return nil
}

// ReadFile returns the current content of the file name (synced or not).
func (c *CrashFS) ReadFile(name string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.lookup("read-file", name)
	if err != nil {
		return nil, err
	}
	if n.isDir {
		return nil, &fs.PathError{Op: "read-file", Path: name, Err: syscall.EISDIR}
	}
	return bytes.Clone(n.data), nil
}

// WriteFile creates or replaces the file name with data and makes it durable, as
// create-or-truncate, write, Sync and SyncDir of the parent would (so it also makes the
// parent's other pending entry changes durable). The parent directory must exist.
func (c *CrashFS) WriteFile(name string, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir, base, err := c.parent("write-file", name)
	if err != nil {
		return err
	}
	n, ok := dir.entries[base]
	switch {
	case !ok:
		n = newFileNode()
		dir.set(base, n)
	case n.isDir:
		return &fs.PathError{Op: "write-file", Path: name, Err: syscall.EISDIR}
	}
	n.data = bytes.Clone(data)
	n.sync()
	dir.syncEntries()
	return nil
}

// crashFile is an open file of a CrashFS.
type crashFile struct {
	fs       *CrashFS
	n        *node
	path     string
	writable bool
	closed   bool
}

func (f *crashFile) check(op string, write bool) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.path, Err: fs.ErrClosed}
	}
	if write && !f.writable {
		return &fs.PathError{Op: op, Path: f.path, Err: syscall.EBADF}
	}
	return nil
}

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.path, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 || off > int64(maxFileSize-len(p)) {
		return 0, &fs.PathError{Op: "write", Path: f.path, Err: fs.ErrInvalid}
	}
	f.n.write(p, int(off))
	return len(p), nil
}

// maxFileSize bounds in-memory files so that offsets always fit an int.
const maxFileSize = 1 << 40

func (f *crashFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.n.sync()
	return nil
}

func (f *crashFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 || size > maxFileSize {
		return &fs.PathError{Op: "truncate", Path: f.path, Err: fs.ErrInvalid}
	}
	f.n.resize(int(size))
	return nil
}

func (f *crashFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("size", false); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *crashFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// OpenSyncer implements vfs.FS. The whole CrashFS is one file system: the Syncer's Sync makes
// the data of every file durable, as File.Sync of each would; directory entries stay as they
// are until SyncDir, which keeps tests strict about directory syncs.
func (c *CrashFS) OpenSyncer(dir string) (vfs.Syncer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.lookup("open-syncer", dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &fs.PathError{Op: "open-syncer", Path: dir, Err: syscall.ENOTDIR}
	}
	return &crashSyncer{fs: c}, nil
}

// crashSyncer syncs a whole CrashFS.
type crashSyncer struct {
	fs     *CrashFS
	closed bool
}

func (s *crashSyncer) Sync() error {
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	if s.closed {
		return &fs.PathError{Op: "syncfs", Path: "/", Err: fs.ErrClosed}
	}
	seen := make(map[*node]bool)
	var walk func(n *node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.isDir {
			n.sync()
			return
		}
		for _, child := range n.entries {
			walk(child)
		}
		for _, child := range n.durable {
			walk(child)
		}
	}
	walk(s.fs.root)
	return nil
}

func (s *crashSyncer) Holds(dir string) (bool, error) {
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	if _, err := s.fs.lookup("stat", dir); err != nil {
		return false, err
	}
	return true, nil
}

func (s *crashSyncer) Close() error {
	s.fs.mu.Lock()
	defer s.fs.mu.Unlock()
	if s.closed {
		return &fs.PathError{Op: "close", Path: "/", Err: fs.ErrClosed}
	}
	s.closed = true
	return nil
}
