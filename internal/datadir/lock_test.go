package datadir

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// Lock creates the data directory durably, and refuses a second holder while the first holds it.
func TestLock(t *testing.T) {
	mem := faultfs.NewCrashFS()
	l, err := Lock(mem, "/var/lib/coordinatord")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.CrashClone(faultfs.CrashOptions{}).ReadDir("/var/lib/coordinatord"); err != nil {
		t.Fatalf("the data directory Lock created does not survive a power cut: %v", err)
	}
	_, err = Lock(mem, "/var/lib/coordinatord")
	if !errors.Is(err, syscall.EWOULDBLOCK) || !strings.Contains(err.Error(), "is in use: another process holds its lock") {
		t.Fatalf("second Lock: %v, want the directory refused as in use", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Lock(mem, "/var/lib/coordinatord")
	if err != nil {
		t.Fatalf("Lock after the release: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if names, err := mem.ReadDir("/var/lib/coordinatord"); err != nil || len(names) != 1 || names[0] != "LOCK" {
		t.Fatalf("the data directory holds %v (%v), want the lock file LOCK", names, err)
	}
}
