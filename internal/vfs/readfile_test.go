package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// ReadFile reads what os.ReadFile reads, and FileSize says its length, on every implementation of
// the seam.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	crash := faultfs.NewCrashFS()
	if err := crash.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"full": "hello world", "empty": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := crash.WriteFile(filepath.Join(dir, name), []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	for fsName, fsys := range map[string]vfs.FS{
		"os":             vfs.OS(),
		"overlay":        vfs.Overlay(vfs.OS()),
		"crash":          crash,
		"fault on crash": faultfs.Wrap(crash, nil),
		"fault on os":    faultfs.Wrap(vfs.OS(), nil),
	} {
		t.Run(fsName, func(t *testing.T) {
			for name, want := range map[string]string{"full": "hello world", "empty": ""} {
				got, err := vfs.ReadFile(fsys, filepath.Join(dir, name))
				if err != nil || string(got) != want {
					t.Errorf("ReadFile(%s) = %q, %v; want %q", name, got, err, want)
				}
			}
			if _, err := vfs.ReadFile(fsys, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("ReadFile of a missing file: %v, want ErrNotExist", err)
			}
			for name, want := range map[string]int64{"full": 11, "empty": 0} {
				if got, err := vfs.FileSize(fsys, filepath.Join(dir, name)); err != nil || got != want {
					t.Errorf("FileSize(%s) = %d, %v; want %d", name, got, err, want)
				}
			}
			if _, err := vfs.FileSize(fsys, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("FileSize of a missing file: %v, want ErrNotExist", err)
			}
		})
	}
}

// A ReadFile that meets a failure returns it and no content, whichever of its operations failed.
func TestReadFileFailures(t *testing.T) {
	crash := faultfs.NewCrashFS()
	if err := crash.WriteFile("/f", []byte("content")); err != nil {
		t.Fatal(err)
	}
	var kinds []faultfs.OpKind
	for i := int64(0); ; i++ {
		inj := faultfs.OnIndex(i, syscall.EIO)
		fsys := faultfs.Wrap(crash, inj)
		got, err := vfs.ReadFile(fsys, "/f")
		op, fired := inj.Fired()
		if !fired {
			if err != nil || string(got) != "content" {
				t.Fatalf("ReadFile without a fault = %q, %v", got, err)
			}
			break
		}
		if !errors.Is(err, syscall.EIO) || got != nil {
			t.Fatalf("ReadFile with %s failed = %q, %v; want no content and EIO", op, got, err)
		}
		kinds = append(kinds, op.Kind)
	}
	want := []faultfs.OpKind{faultfs.OpOpen, faultfs.OpSize, faultfs.OpRead, faultfs.OpClose}
	if !slices.Equal(kinds, want) {
		t.Fatalf("ReadFile's operations: %v, want %v", kinds, want)
	}
}

// ReplaceFile leaves the old content or the new one after a power cut at any point, never a
// mixture or nothing, and replaces a temporary file an earlier attempt left.
func TestReplaceFile(t *testing.T) {
	mem := faultfs.NewCrashFS()
	if err := mem.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.ReplaceFile(mem, "/d", "f.tmp", "f", []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteFile("/d/f.tmp", []byte("left by a crash")); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); ; i++ {
		inj := faultfs.OnIndex(i, syscall.EIO)
		fsys := faultfs.Wrap(mem, inj)
		err := vfs.ReplaceFile(fsys, "/d", "f.tmp", "f", []byte("new"))
		cut := mem.CrashClone(faultfs.CrashOptions{})
		got, rerr := vfs.ReadFile(cut, "/d/f")
		if rerr != nil || (string(got) != "old" && string(got) != "new") {
			t.Fatalf("failing operation %d: after a power cut the file holds %q (%v)", i, got, rerr)
		}
		if _, fired := inj.Fired(); !fired {
			if err != nil || string(got) != "new" {
				t.Fatalf("no failure: %v, content %q", err, got)
			}
			return
		}
		if err == nil && string(got) != "new" {
			t.Fatalf("failing operation %d: ReplaceFile succeeded but a power cut keeps %q", i, got)
		}
		if err := vfs.ReplaceFile(mem, "/d", "f.tmp", "f", []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
}
