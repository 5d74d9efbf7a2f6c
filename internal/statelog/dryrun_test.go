package statelog

import (
	"fmt"
	"maps"
	"testing"

	"github.com/coordinatord/coordinatord/internal/statelog/vfs"
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

// reportText renders a report with its corruptions as text, for comparison.
func reportText(r RepairReport) string {
	cs := make([]string, len(r.Corruptions))
	for i, c := range r.Corruptions {
		cs[i] = c.Error()
	}
	r.Corruptions = nil
	return fmt.Sprintf("%+v corruptions=%q", r, cs)
}
