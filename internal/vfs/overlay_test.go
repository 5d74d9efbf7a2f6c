package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// The overlay shows its changes and never writes base.
func TestOverlayKeepsChangesInMemory(t *testing.T) {
	dir := t.TempDir()
	base := OS()
	for name, content := range map[string]string{"a": "hello world", "b": "bye"} {
		f, err := base.Create(dir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(content), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	before := dirContent(t, dir)
	o := Overlay(base)

	a, err := o.OpenReadWrite(dir + "/a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(dir + "/b"); err != nil {
		t.Fatal(err)
	}
	c, err := o.Create(dir + "/c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAt([]byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Rename(dir+"/c", dir+"/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Create(dir + "/a"); err == nil {
		t.Fatal("Create of an existing file succeeded")
	}
	if _, err := o.Open(dir + "/b"); err == nil {
		t.Fatal("a removed file still opens")
	}
	names, err := o.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names, []string{"a", "d"}) {
		t.Fatalf("ReadDir = %v, want [a d]", names)
	}
	// A second handle sees the cut, then a write through the first copies the file up.
	a2, err := o.Open(dir + "/a")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllOf(t, a2); got != "hello" {
		t.Fatalf("a reads %q through a second handle, want %q", got, "hello")
	}
	if _, err := a.WriteAt([]byte("!"), 5); err != nil {
		t.Fatal(err)
	}
	if got := readAllOf(t, a2); got != "hello!" {
		t.Fatalf("a reads %q after a write, want %q", got, "hello!")
	}
	d, err := o.Open(dir + "/d")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllOf(t, d); got != "new" {
		t.Fatalf("d reads %q, want %q", got, "new")
	}
	if after := dirContent(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the overlay wrote to the directory: %v, was %v", after, before)
	}
}

func readAllOf(t *testing.T, f File) string {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n != len(b) {
		t.Fatalf("read %d of %d bytes: %v", n, size, err)
	}
	return string(b)
}

// dirContent maps the name of every file in dir to its content.
func dirContent(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// lockRefusing is an OS file system whose Lock fails with err.
type lockRefusing struct {
	FS
	err error
}

func (l lockRefusing) Lock(string) (io.Closer, error) { return nil, l.err }

// The overlay's Lock is refused only by a lock another process holds: a lock file it cannot open
// (a read-only copy of a log) leaves the dry run to read the copy.
func TestOverlayLock(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "LOCK")
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := fmt.Errorf("lock %s: %w", name, syscall.EWOULDBLOCK)
	if _, err := Overlay(lockRefusing{OS(), held}).Lock(name); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("lock held elsewhere: error %v, want EWOULDBLOCK", err)
	}
	for _, cannot := range []error{syscall.EROFS, fs.ErrPermission} {
		if l, err := Overlay(lockRefusing{OS(), cannot}).Lock(name); err != nil || l.Close() != nil {
			t.Errorf("lock file that cannot be opened (%v): error %v, want the dry run to go on", cannot, err)
		}
	}
	l, err := Overlay(OS()).Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OS().Lock(name); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("the overlay's lock is not the file's: a second Lock got %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Overlay(OS()).Lock(filepath.Join(dir, "absent")); err != nil {
		t.Errorf("lock of a file that does not exist: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the overlay created the lock file: %v", err)
	}
}
