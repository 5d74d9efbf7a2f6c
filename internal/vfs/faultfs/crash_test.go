package faultfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

func mustCreate(t *testing.T, f vfs.FS, name string, data []byte, sync bool) vfs.File {
	t.Helper()
	file, err := f.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := file.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

func content(t *testing.T, c *CrashFS, name string) (string, bool) {
	t.Helper()
	b, err := c.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestCrashCloneKeepsOnlySyncedState(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, c *CrashFS)
		file   string
		want   string
		exists bool
	}{
		{name: "unsynced data is lost", file: "/x", exists: true, want: "",
			setup: func(t *testing.T, c *CrashFS) {
				mustCreate(t, c, "/x", []byte("data"), false)
				if err := c.SyncDir("/"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "synced data without a directory sync is lost with its entry", file: "/x",
			setup: func(t *testing.T, c *CrashFS) { mustCreate(t, c, "/x", []byte("data"), true) }},
		{name: "synced data and entry survive", file: "/x", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				mustCreate(t, c, "/x", []byte("data"), true)
				if err := c.SyncDir("/"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "appends after the last sync are lost", file: "/x", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				f := mustCreate(t, c, "/x", []byte("data"), true)
				_ = c.SyncDir("/")
				if _, err := f.WriteAt([]byte("more"), 4); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "overwrite after the last sync is lost", file: "/x", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				f := mustCreate(t, c, "/x", []byte("data"), true)
				_ = c.SyncDir("/")
				if _, err := f.WriteAt([]byte("DA"), 0); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "truncate and rewrite after the last sync is lost", file: "/x", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				f := mustCreate(t, c, "/x", []byte("data"), true)
				_ = c.SyncDir("/")
				if err := f.Truncate(1); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("XYZ"), 1); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "truncate then sync is kept", file: "/x", exists: true, want: "da",
			setup: func(t *testing.T, c *CrashFS) {
				f := mustCreate(t, c, "/x", []byte("data"), true)
				_ = c.SyncDir("/")
				if err := f.Truncate(2); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "unsynced removal is undone", file: "/x", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				mustCreate(t, c, "/x", []byte("data"), true)
				_ = c.SyncDir("/")
				if err := c.Remove("/x"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "unsynced rename is undone", file: "/x", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				mustCreate(t, c, "/x", []byte("data"), true)
				_ = c.SyncDir("/")
				if err := c.Rename("/x", "/y"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "synced rename is kept", file: "/y", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				mustCreate(t, c, "/x", []byte("data"), true)
				_ = c.SyncDir("/")
				if err := c.Rename("/x", "/y"); err != nil {
					t.Fatal(err)
				}
				_ = c.SyncDir("/")
			}},
		{name: "a directory whose own entry is unsynced vanishes", file: "/a/b/x",
			setup: func(t *testing.T, c *CrashFS) {
				if err := c.MkdirAll("/a/b"); err != nil {
					t.Fatal(err)
				}
				mustCreate(t, c, "/a/b/x", []byte("data"), true)
				_ = c.SyncDir("/a/b")
				_ = c.SyncDir("/a")
			}},
		{name: "nested directories synced top down survive", file: "/a/b/x", exists: true, want: "data",
			setup: func(t *testing.T, c *CrashFS) {
				if err := c.MkdirAll("/a/b"); err != nil {
					t.Fatal(err)
				}
				mustCreate(t, c, "/a/b/x", []byte("data"), true)
				for _, d := range []string{"/", "/a", "/a/b"} {
					_ = c.SyncDir(d)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCrashFS()
			tc.setup(t, c)
			got, exists := content(t, c.CrashClone(CrashOptions{}), tc.file)
			if exists != tc.exists || got != tc.want {
				t.Fatalf("after the crash %s: exists %v, content %q; want %v, %q", tc.file, exists, got, tc.exists, tc.want)
			}
		})
	}
}

func TestCrashCloneRandomSurvival(t *testing.T) {
	kept := map[int]bool{}
	for seed := range uint64(200) {
		c := NewCrashFS()
		f := mustCreate(t, c, "/x", []byte("synced"), true)
		_ = c.SyncDir("/")
		if _, err := f.WriteAt([]byte("0123456789"), 6); err != nil {
			t.Fatal(err)
		}
		got, _ := content(t, c.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 1))}), "/x")
		if len(got) < 6 || got != "synced0123456789"[:len(got)] {
			t.Fatalf("seed %d: content %q is not the synced bytes plus a prefix of the unsynced ones", seed, got)
		}
		kept[len(got)-6] = true

		z, _ := content(t, c.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 1)), ZeroFill: true}), "/x")
		if len(z) != len(got) || z[:6] != "synced" || strings.Trim(z[6:], "\x00") != "" {
			t.Fatalf("seed %d: zero-filled content %q, want %d bytes, zeros after the synced ones", seed, z, len(got))
		}
	}
	if !kept[0] || !kept[10] || len(kept) < 8 {
		t.Fatalf("surviving unsynced lengths %v: want 0, 10 and most in between", kept)
	}
}

func TestCrashCloneDirectoryOperationsSurviveInOrder(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(200) {
		c := NewCrashFS()
		mustCreate(t, c, "/old", []byte("1"), true)
		_ = c.SyncDir("/")
		// Pending, in order: create a, create b, rename tmp over old.
		mustCreate(t, c, "/a", nil, true)
		mustCreate(t, c, "/b", nil, true)
		mustCreate(t, c, "/tmp", []byte("2"), true)
		if err := c.Rename("/tmp", "/old"); err != nil {
			t.Fatal(err)
		}
		names, err := c.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 2))}).ReadDir("/")
		if err != nil {
			t.Fatal(err)
		}
		key := strings.Join(names, ",")
		valid := map[string]bool{"old": true, "a,old": true, "a,b,old": true, "a,b,old,tmp": true}
		if !valid[key] {
			t.Fatalf("seed %d: entries %q are not a prefix of the pending operations", seed, key)
		}
		seen[key] = true
	}
	if len(seen) != 4 {
		t.Fatalf("outcomes %v, want all four prefixes", seen)
	}
}

func TestCrashCloneIsIndependent(t *testing.T) {
	c := NewCrashFS()
	f := mustCreate(t, c, "/x", []byte("abc"), true)
	_ = c.SyncDir("/")
	clone := c.CrashClone(CrashOptions{})
	if _, err := f.WriteAt([]byte("Z"), 0); err != nil {
		t.Fatal(err)
	}
	g, err := clone.OpenReadWrite("/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("Q"), 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, c, "/x"); got != "Zbc" {
		t.Fatalf("original holds %q, want %q", got, "Zbc")
	}
	if got, _ := content(t, clone, "/x"); got != "aQc" {
		t.Fatalf("clone holds %q, want %q", got, "aQc")
	}
}

func TestCrashFSErrors(t *testing.T) {
	c := NewCrashFS()
	if err := c.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, "/d/x", []byte("abc"), true)
	ro, err := c.Open("/d/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MkdirAll("/e"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"create existing", errOf(c.Create("/d/x")), fs.ErrExist},
		{"open missing", errOf(c.Open("/d/nope")), fs.ErrNotExist},
		{"open in missing dir", errOf(c.Open("/nope/x")), fs.ErrNotExist},
		{"open a directory", errOf(c.Open("/d")), syscall.EISDIR},
		{"remove missing", c.Remove("/d/nope"), fs.ErrNotExist},
		{"remove non-empty dir", c.Remove("/d"), syscall.ENOTEMPTY},
		{"rename across directories", c.Rename("/d/x", "/e/x"), syscall.EXDEV},
		{"read-dir of a file", errOf(c.ReadDir("/d/x")), syscall.ENOTDIR},
		{"mkdir through a file", c.MkdirAll("/d/x/y"), syscall.ENOTDIR},
		{"write read-only", errOf(ro.WriteAt([]byte("z"), 0)), syscall.EBADF},
		{"truncate read-only", ro.Truncate(0), syscall.EBADF},
		{"path escaping the root", errOf(c.Open("../x")), fs.ErrInvalid},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	buf := make([]byte, 5)
	if n, err := ro.ReadAt(buf, 1); n != 2 || err != io.EOF || string(buf[:2]) != "bc" {
		t.Errorf("short ReadAt = %d, %v, %q; want 2, EOF, \"bc\"", n, err, buf[:n])
	}
	if n, err := ro.ReadAt(buf, 3); n != 0 || err != io.EOF {
		t.Errorf("ReadAt at the end = %d, %v; want 0, EOF", n, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := ro.ReadAt(buf, 0); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadAt after Close = %v, want ErrClosed", err)
	}
	l, err := c.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock("d/LOCK"); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("second Lock = %v, want EWOULDBLOCK", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l2, err := c.Lock("/d/LOCK"); err != nil {
		t.Errorf("Lock after release = %v", err)
	} else {
		_ = l2.Close()
	}
	if names, _ := c.ReadDir("/d"); !slices.Equal(names, []string{"LOCK", "x"}) {
		t.Errorf("ReadDir = %v, want sorted [LOCK x]", names)
	}
}

func errOf[T any](_ T, err error) error { return err }

func TestWriteBeyondEndZeroFills(t *testing.T) {
	c := NewCrashFS()
	f := mustCreate(t, c, "/x", []byte("ab"), true)
	if _, err := f.WriteAt([]byte("z"), 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, c, "/x"); got != "ab\x00\x00\x00z\x00\x00" {
		t.Fatalf("content %q, want zero-filled holes", got)
	}
	if size, _ := f.Size(); size != 8 {
		t.Fatalf("Size() = %d, want 8", size)
	}
}

// The syncer of a CrashFS makes every file's data durable, open or not, and leaves directory
// entries to SyncDir; through FS, its operations are injectable.
func TestCrashFSSyncer(t *testing.T) {
	mem := NewCrashFS()
	if err := mem.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	old, err := mem.Create("/d/old")
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := old.WriteAt([]byte("synced by syncfs"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Create("/d/new"); err != nil { // entry never synced
		t.Fatal(err)
	}
	f := Wrap(mem, nil)
	s, err := f.OpenSyncer("/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	after := mem.CrashClone(CrashOptions{})
	if b, err := after.ReadFile("/d/old"); err != nil || string(b) != "synced by syncfs" {
		t.Fatalf("after the cut /d/old = %q, %v", b, err)
	}
	if _, err := after.ReadFile("/d/new"); err == nil {
		t.Fatal("a directory entry survived without SyncDir")
	}
	if same, err := s.Holds("/d"); err != nil || !same {
		t.Fatalf("Holds(/d) = %v, %v", same, err)
	}
	f.SetInjector(Match(OnKinds(OpSyncFS), syscall.EIO))
	if err := s.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("injected syncfs failure: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.OpenSyncer("/missing"); err == nil {
		t.Fatal("OpenSyncer of a missing directory succeeded")
	}
}
