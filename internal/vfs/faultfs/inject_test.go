package faultfs

import (
	"errors"
	"io/fs"
	"sync"
	"syscall"
	"testing"
)

func TestOnIndexFailsExactlyOneOperation(t *testing.T) {
	for i := range int64(6) {
		mem := NewCrashFS()
		inj := OnIndex(i, syscall.EIO)
		f := Wrap(mem, inj)
		// Operations 0..5: create, write, sync, close, sync-dir, mkdir-all.
		var errs []error
		record := func(err error) { errs = append(errs, err) }
		file, err := f.Create("/x")
		record(err)
		if file != nil {
			_, err = file.WriteAt([]byte("abc"), 0)
			record(err)
			record(file.Sync())
			record(file.Close())
		}
		record(f.SyncDir("/"))
		record(f.MkdirAll("/d"))
		failed := 0
		for _, err := range errs {
			if err == nil {
				continue
			}
			failed++
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("index %d: error %v does not wrap EIO", i, err)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				t.Fatalf("index %d: error %v is not an *fs.PathError", i, err)
			}
		}
		if failed != 1 {
			t.Fatalf("index %d: %d operations failed, want exactly 1 (%v)", i, failed, errs)
		}
		op, fired := inj.Fired()
		if !fired {
			t.Fatalf("index %d: Fired() = false after a failure", i)
		}
		wantKinds := []OpKind{OpCreate, OpWrite, OpSync, OpClose, OpSyncDir, OpMkdirAll}
		if op.Kind != wantKinds[i] {
			t.Fatalf("index %d: failed %s, want %s", i, op.Kind, wantKinds[i])
		}
	}
	inj := OnIndex(100, nil)
	f := Wrap(NewCrashFS(), inj)
	if err := f.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	if _, fired := inj.Fired(); fired || inj.Seen() != 1 || f.Ops() != 1 {
		t.Fatalf("after one operation: fired %v, seen %d, ops %d", fired, inj.Seen(), f.Ops())
	}
}

func TestMatchPredicates(t *testing.T) {
	mem := NewCrashFS()
	f := Wrap(mem, Match(OnKinds(OpSync, OpWrite).And(OnPath("*.seg")), syscall.ENOSPC))
	seg, err := f.Create("/a.seg")
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.Create("/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seg.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to a.seg = %v, want ENOSPC", err)
	}
	if err := seg.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("sync of a.seg = %v, want ENOSPC", err)
	}
	if _, err := seg.Size(); err != nil {
		t.Fatalf("size of a.seg = %v, want nil (not selected)", err)
	}
	if _, err := other.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("write to b.txt = %v, want nil (path not selected)", err)
	}
	if b, _ := mem.ReadFile("/a.seg"); len(b) != 0 {
		t.Fatal("a failed write reached the file")
	}
	if !OnPath("/a.seg")(Op{Kind: OpOpen, Path: "/a.seg"}) || OnPath("[")(Op{Path: "["}) {
		t.Fatal("OnPath: full-path match or malformed-pattern handling is wrong")
	}
}

func TestSetInjectorSwitchesAtRunTime(t *testing.T) {
	f := Wrap(NewCrashFS(), nil)
	failAll := Match(func(Op) bool { return true }, nil)
	if err := f.MkdirAll("/a"); err != nil {
		t.Fatal(err)
	}
	f.SetInjector(failAll)
	if err := f.MkdirAll("/b"); !errors.Is(err, ErrInjected) {
		t.Fatalf("with the injector on: %v, want ErrInjected", err)
	}
	f.SetInjector(nil)
	if err := f.MkdirAll("/b"); err != nil {
		t.Fatalf("with the injector off: %v", err)
	}
}

func TestAnyConsultsEveryInjector(t *testing.T) {
	a, b := OnIndex(1, syscall.EIO), OnIndex(1, syscall.ENOSPC)
	f := Wrap(NewCrashFS(), Any(a, b))
	_ = f.MkdirAll("/x")
	if err := f.MkdirAll("/y"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second operation = %v, want the first injector's EIO", err)
	}
	if _, fired := b.Fired(); !fired {
		t.Fatal("Any stopped consulting injectors after the first failure")
	}
}

func TestCloseIsPerformedEvenWhenFailed(t *testing.T) {
	mem := NewCrashFS()
	f := Wrap(mem, Match(OnKinds(OpClose), syscall.EIO))
	file, err := f.Create("/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close = %v, want EIO", err)
	}
	f.SetInjector(nil)
	if _, err := file.Size(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("Size after a failed Close = %v, want ErrClosed: the file was not closed", err)
	}
	lock, err := f.Lock("/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	f.SetInjector(Match(OnKinds(OpClose), syscall.EIO))
	if err := lock.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("unlock = %v, want EIO", err)
	}
	if l, err := mem.Lock("/LOCK"); err != nil {
		t.Fatalf("the lock is still held after a failed release: %v", err)
	} else {
		_ = l.Close()
	}
}

func TestFSConcurrentUse(t *testing.T) {
	mem := NewCrashFS()
	f := Wrap(mem, nil)
	if err := f.MkdirAll("/c"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				name := "/c/" + string(rune('a'+g))
				if i == 0 {
					file, err := f.Create(name)
					if err == nil {
						_ = file.Close()
					}
				}
				file, err := f.OpenReadWrite(name)
				if err != nil {
					continue
				}
				_, _ = file.WriteAt([]byte{byte(i)}, int64(i))
				_ = file.Sync()
				_ = file.Close()
				if i%50 == 0 {
					_ = mem.CrashClone(CrashOptions{})
				}
			}
		}()
	}
	for i := range 200 {
		if i%2 == 0 {
			f.SetInjector(OnIndex(int64(i), nil))
		} else {
			f.SetInjector(nil)
		}
	}
	wg.Wait()
	if f.Ops() == 0 {
		t.Fatal("no operations counted")
	}
}

// An AfterEffect failure of a write, sync, truncation or file-system sync lets the operation take
// effect, then reports the error; other operations fail without effect.
func TestAfterEffect(t *testing.T) {
	mem := NewCrashFS()
	fail := Match(OnKinds(OpWrite, OpSync, OpTruncate, OpSyncFS, OpRemove), AfterEffect(syscall.EIO))
	f := Wrap(mem, nil)
	file, err := f.Create("/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	f.SetInjector(fail)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s: %v, want EIO", what, err)
		}
	}
	_, err = file.WriteAt([]byte("abcdef"), 0)
	check("write", err)
	check("sync", file.Sync())
	if got, _ := content(t, mem.CrashClone(CrashOptions{}), "/x"); got != "abcdef" {
		t.Fatalf("after a write and a sync that failed after taking effect, a power cut leaves %q", got)
	}
	check("truncate", file.Truncate(3))
	syncer, err := f.OpenSyncer("/")
	if err != nil {
		t.Fatal(err)
	}
	defer syncer.Close()
	check("syncfs", syncer.Sync())
	if got, _ := content(t, mem.CrashClone(CrashOptions{}), "/x"); got != "abc" {
		t.Fatalf("after a truncation and a file-system sync that failed after taking effect, a power cut leaves %q", got)
	}
	check("remove", f.Remove("/x"))
	if _, exists := content(t, mem, "/x"); !exists {
		t.Fatal("a remove failed with AfterEffect took effect")
	}
}
