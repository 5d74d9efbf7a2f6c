package statelog

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// Repair through vfs.Overlay is a dry run: for every damage of the corruption table it reports
// exactly what the real Repair then does, and leaves the directory as it was.
func TestRepairThroughOverlayIsADryRun(t *testing.T) {
	pristine, pristineSegs, _ := buildCorruptionLog(t)
	cases := append(corruptionCases(), corruptionCase{name: "healthy", damage: func(*testing.T, string, []string) {}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := damagedCopy(t, pristine, pristineSegs, tc)
			before := dirContent(t, dir)
			dryOpts := ctOptions()
			dryOpts.FS = vfs.Overlay(vfs.OS())
			dry, dryErr := Repair(nil, dir, dryOpts)
			if after := dirContent(t, dir); !maps.Equal(before, after) {
				t.Fatal("the dry run changed the directory")
			}
			done, doneErr := Repair(nil, dir, ctOptions())
			if fmt.Sprint(dryErr) != fmt.Sprint(doneErr) {
				t.Fatalf("dry run error %v, repair error %v", dryErr, doneErr)
			}
			if got, want := reportText(dry), reportText(done); got != want {
				t.Fatalf("dry run reported\n%s\nrepair did\n%s", got, want)
			}
		})
	}
}

// checkDryRun compares Repair through vfs.Overlay with the real Repair on copies of the random
// log of seed: the same report or error, and nothing changed under the overlay.
func checkDryRun(t testing.TB, seed uint64) {
	mem, opts, _ := randomLog(t, seed)
	base := mem.CrashClone(faultfs.CrashOptions{})
	before := memSnapshot(t, base, "/log")
	dryOpts := opts
	dryOpts.FS = vfs.Overlay(base)
	dry, dryErr := Repair(nil, "/log", dryOpts)
	after := memSnapshot(t, base, "/log")
	delete(after, lockFileName) // the overlay takes base's lock, which may touch the lock file
	delete(before, lockFileName)
	if !maps.Equal(before, after) {
		t.Fatal("the dry run changed the log")
	}
	opts.FS = mem.CrashClone(faultfs.CrashOptions{})
	done, doneErr := Repair(nil, "/log", opts)
	if fmt.Sprint(dryErr) != fmt.Sprint(doneErr) {
		t.Fatalf("dry run error %v, repair error %v", dryErr, doneErr)
	}
	if got, want := reportText(dry), reportText(done); got != want {
		t.Fatalf("dry run reported\n%s\nrepair did\n%s", got, want)
	}
}

// The dry run over random damaged logs, a few hundred in every test run.
func TestRepairDryRunMatchesRepairRandom(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { checkDryRun(t, seed) })
	}
}

// FuzzRepairDryRun explores the same property over fuzzer-chosen seeds.
func FuzzRepairDryRun(f *testing.F) {
	for _, seed := range []uint64{0, 1, 7, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkDryRun(t, seed) })
}

// reportText renders a report with its corruptions as text, for comparison.
func reportText(r RepairReport) string {
	cs := make([]string, len(r.Corruptions))
	for i, c := range r.Corruptions {
		cs[i] = c.Error()
	}
	r.Corruptions = nil
	torn := "none"
	if r.TornTail != nil {
		torn = fmt.Sprintf("%+v", *r.TornTail)
	}
	r.TornTail = nil
	return fmt.Sprintf("%+v corruptions=%q torn=%s", r, cs, torn)
}

// TestRepairReportsTornTail: damage to the last frame of the newest segment is a torn tail: Repair
// truncates it, as Open does, and says so, with the bytes it dropped; a healthy log reports none.
func TestRepairReportsTornTail(t *testing.T) {
	pristine, pristineSegs, _ := buildCorruptionLog(t)
	cases := append(corruptionCases(), corruptionCase{name: "healthy", damage: func(*testing.T, string, []string) {}})
	torn := 0
	for _, tc := range cases {
		// A frame whose checksums hold but whose content is impossible is corruption, not torn.
		lastFrame := strings.HasPrefix(tc.name, "newest segment/last frame/") && !strings.Contains(tc.name, "checksums valid")
		if !lastFrame && tc.name != "healthy" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			dir, segs := damagedCopy(t, pristine, pristineSegs, tc)
			newest := segs[len(segs)-1]
			before, err := os.Stat(newest)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Repair(nil, dir, ctOptions())
			if err != nil {
				t.Fatal(err)
			}
			if !lastFrame {
				if r.TornTail != nil {
					t.Fatalf("healthy log reported a torn tail: %+v", *r.TornTail)
				}
				return
			}
			torn++
			after, err := os.Stat(newest)
			if err != nil {
				t.Fatal(err)
			}
			if tt := r.TornTail; len(r.Corruptions) != 0 || tt == nil || tt.Segment != newest || tt.At != after.Size() ||
				tt.Bytes != before.Size()-after.Size() || tt.Bytes == 0 || tt.Reason == "" {
				t.Fatalf("report %s, want a torn tail of %s from %d to %d bytes", reportText(r), newest, before.Size(), after.Size())
			}
		})
	}
	if torn == 0 {
		t.Fatal("the corruption table has no damage to the last frame of the newest segment")
	}
}

// A dry run takes the log's lock as the real repair does: a log that another process has open,
// and may be appending to, pruning or rolling while it is read, is refused as in use. Without the
// lock a dry run against a running server read a log that changed under it and could fail with
// "remove …: file does not exist" or report damage that was not there.
func TestRepairDryRunRefusesALogInUse(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, ctOptions())
	if _, err := l.Append([][]byte{[]byte("record")}); err != nil {
		t.Fatal(err)
	}
	before := dirContent(t, dir)
	dryOpts := ctOptions()
	dryOpts.FS = vfs.Overlay(vfs.OS())
	for name, opts := range map[string]Options{"dry run": dryOpts, "repair": ctOptions()} {
		_, err := Repair(nil, dir, opts)
		if !errors.Is(err, syscall.EWOULDBLOCK) || !strings.Contains(fmt.Sprint(err), "is in use") {
			t.Errorf("%s of a log that is open: error %v, want it refused as in use", name, err)
		}
	}
	if after := dirContent(t, dir); !maps.Equal(before, after) {
		t.Fatal("the refused runs changed the directory")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if report, err := Repair(nil, dir, dryOpts); err != nil || len(report.Corruptions) > 0 || report.TornTail != nil {
		t.Fatalf("dry run once the log is closed: %+v, %v", report, err)
	}
}
