//go:build linux

package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheckSyncfsKernel(t *testing.T) {
	tests := []struct {
		release string
		ok      bool
	}{
		{"6.18.44-fc-v657", true},
		{"5.8.0", true},
		{"5.10.0-28-amd64", true},
		{"5.8-rc1", true},
		{"10.0.1", true},
		{"5.7.19", false},
		{"4.19.0-25-amd64", false},
		{"3.10.0-1160.el7.x86_64", false},
		{"5", false},
		{"", false},
		{"x.y", false},
		{"5.x", false},
	}
	for _, tc := range tests {
		t.Run(tc.release, func(t *testing.T) {
			if err := checkSyncfsKernel(tc.release); (err == nil) != tc.ok {
				t.Fatalf("checkSyncfsKernel(%q) = %v, want accepted: %v", tc.release, err, tc.ok)
			}
		})
	}
}

func TestOSSyncer(t *testing.T) {
	dir := t.TempDir()
	s, err := OS().OpenSyncer(dir)
	if err != nil {
		t.Fatalf("OpenSyncer: %v (needs Linux 5.8 or later)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir  string
		same bool
	}{{sub, true}, {"/proc", false}} {
		if same, err := s.Holds(tc.dir); err != nil || same != tc.same {
			t.Fatalf("Holds(%s) = %v, %v; want %v", tc.dir, same, err, tc.same)
		}
	}
	if _, err := s.Holds(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Holds of a missing directory succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OS().OpenSyncer(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("OpenSyncer of a missing directory succeeded")
	}
}
