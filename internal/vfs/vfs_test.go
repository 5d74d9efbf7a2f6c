package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestOSFS(t *testing.T) {
	fsys := OS()
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "x")
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Create(name); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create of an existing file = %v, want ErrExist", err)
	}
	if _, err := f.WriteAt([]byte("hello world"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if size, err := f.Size(); err != nil || size != 5 {
		t.Fatalf("Size() = %d, %v; want 5", size, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}

	r, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := r.ReadAt(buf, 2); n != 3 || err != io.EOF || string(buf[:n]) != "llo" {
		t.Fatalf("ReadAt = %d, %v, %q; want 3, EOF, \"llo\"", n, err, buf[:n])
	}
	if _, err := r.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("WriteAt on a read-only file succeeded")
	}
	_ = r.Close()

	rw, err := fsys.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.WriteAt([]byte("J"), 0); err != nil {
		t.Fatal(err)
	}
	_ = rw.Close()
	if b, _ := os.ReadFile(name); string(b) != "Jello" {
		t.Fatalf("content %q, want \"Jello\"", b)
	}

	if err := fsys.Rename(name, filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Create(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if names, err := fsys.ReadDir(dir); err != nil || !slices.Equal(names, []string{"a", "y"}) {
		t.Fatalf("ReadDir = %v, %v; want sorted [a y]", names, err)
	}
	if err := fsys.Remove(filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Open(filepath.Join(dir, "y")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a removed file = %v, want ErrNotExist", err)
	}
	if _, err := fsys.ReadDir(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadDir of a missing directory = %v, want ErrNotExist", err)
	}
	if err := fsys.SyncDir(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory = %v, want ErrNotExist", err)
	}
}

func TestOSLockIsExclusive(t *testing.T) {
	fsys := OS()
	name := filepath.Join(t.TempDir(), "LOCK")
	l, err := fsys.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lock(name); err == nil {
		t.Fatal("a second Lock of a held lock succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = fsys.Lock(name)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	_ = l.Close()
}
