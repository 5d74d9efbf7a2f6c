package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// binPath is the coordinatord binary the tests run, built once by TestMain. It is built without
// the race detector even when the tests run under it: these tests check what the processes
// answer, not their data races (the package tests do), and the race detector would slow each of
// three to five servers on a two-core machine several times over (Go documents 2–20×).
var binPath string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "coordinatord-clustertest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "coordinatord")
	build := exec.Command("go", "build", "-o", binPath, "../..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build coordinatord:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines left after the tests:", err)
			return 1
		}
	}
	return code
}
