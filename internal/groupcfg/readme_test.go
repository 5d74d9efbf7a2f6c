package groupcfg

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	readmeBegin = "<!-- config-table:begin -->"
	readmeEnd   = "<!-- config-table:end -->"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the config table between the README markers from Definitions()")

// TestREADMEConfigTable fails when the README's config table is not exactly markdownTable().
func TestREADMEConfigTable(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	regenerate := "go test ./internal/groupcfg -run TestREADMEConfigTable -update-readme"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v\nThe README at the repository root must hold the config table (markdownTable()'s output) between the lines %s and %s.",
			path, err, readmeBegin, readmeEnd)
	}
	text := string(data)
	begin, end := strings.Index(text, readmeBegin), strings.Index(text, readmeEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no config table section: add a line %s, then a line %s, and run\n\t%s\nto fill in the table generated from Definitions()",
			path, readmeBegin, readmeEnd, regenerate)
	}
	section := text[begin+len(readmeBegin) : end]
	want := markdownTable()
	if strings.Trim(section, "\n") == strings.Trim(want, "\n") {
		return
	}
	if *updateReadme {
		updated := text[:begin+len(readmeBegin)] + "\n" + want + text[end:]
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the config table of %s", path)
		return
	}
	got, exp := strings.Split(strings.Trim(section, "\n"), "\n"), strings.Split(strings.Trim(want, "\n"), "\n")
	for i := 0; i < max(len(got), len(exp)); i++ {
		var g, e string
		if i < len(got) {
			g = got[i]
		}
		if i < len(exp) {
			e = exp[i]
		}
		if g != e {
			t.Fatalf("the config table of %s differs from Definitions() at table line %d:\n README:      %q\n Definitions: %q\nRun\n\t%s\nto regenerate it.",
				path, i+1, g, e, regenerate)
		}
	}
}

func TestMarkdownTable(t *testing.T) {
	table := markdownTable()
	for _, d := range Definitions() {
		if !strings.Contains(table, "| `"+d.Name+"` |") {
			t.Errorf("no row for %s", d.Name)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		if strings.HasPrefix(line, "| `") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 9 {
			t.Errorf("row with a wrong number of cells: %s", line)
		}
	}
	for _, want := range []string{
		"| `share.snapshot.update.records.per.snapshot` | group | INT | inherits `share.coordinator.snapshot.update.records.per.snapshot` | [200, `share.coordinator.snapshot.update.records.per.snapshot`] |",
		"| `share.coordinator.snapshot.update.records.per.snapshot` | broker | INT | `500` | [200, 1000] | medium | yes |",
		"| `max.partitions.per.request` | server | INT | `5000` | [1, 100000] |",
		"| `share.coordinator.state.topic.segment.bytes` | broker | INT | `104857600` | [1048576, ...] |",
		`group="\_\_other\_\_"`,
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}
