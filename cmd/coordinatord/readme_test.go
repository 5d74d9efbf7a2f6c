package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// readmeBlocks returns the fenced code blocks of README.md that follow heading, in order.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, heading)
	if i < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	text = text[i+len(heading):]
	if next := strings.Index(text, "\n## "); next >= 0 {
		text = text[:next]
	}
	var blocks []string
	for {
		start := strings.Index(text, "```")
		if start < 0 {
			return blocks
		}
		text = text[start+3:]
		text = text[strings.Index(text, "\n")+1:] // skip the info string
		end := strings.Index(text, "```")
		if end < 0 {
			t.Fatalf("unterminated code block after %q", heading)
		}
		blocks = append(blocks, text[:end])
		text = text[end+3:]
	}
}

// shellCommands splits a shell block into commands: comments and blank lines dropped, lines
// joined across trailing backslashes and across unterminated single quotes.
func shellCommands(block string) []string {
	var cmds []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if c := strings.Index(line, "  #"); c >= 0 && strings.Count(line[:c], "'")%2 == 0 {
			line = line[:c] // trailing comment outside quotes
		}
		cur.WriteString(line)
		text := cur.String()
		if strings.HasSuffix(strings.TrimRight(text, " "), "\\") || strings.Count(text, "'")%2 == 1 {
			cur.WriteString("\n") // the shell joins the lines: backslash-newline, or inside quotes
			continue
		}
		cmds = append(cmds, strings.TrimSpace(text))
		cur.Reset()
	}
	return cmds
}

// TestREADMEAsANewUser runs the README the way a new user would: the quick-start command that
// starts the server (with flags added only to isolate the test: loopback port 0 and a temporary
// data directory), then every grpcurl command of the walk-through, verbatim except for the
// address. Each must succeed, and no state RPC may answer a per-partition error.
func TestREADMEAsANewUser(t *testing.T) {
	quick := shellCommands(readmeBlocks(t, "## Quick start")[0])
	if len(quick) != 2 || quick[0] != "go run ./cmd/coordinatord" || quick[1] != "make test" {
		t.Fatalf("the quick start must be exactly the run and the test command, got %q", quick)
	}
	walk := shellCommands(readmeBlocks(t, "## A walk-through with grpcurl")[0])
	if len(walk) < 8 {
		t.Fatalf("walk-through has %d commands, want Initialize, Read, Write, ReadSummary, alter, describe, FindCoordinator", len(walk))
	}

	grpcurl := filepath.Join(t.TempDir(), "grpcurl")
	build := exec.Command("go", "build", "-o", grpcurl, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build grpcurl (a tool dependency in go.mod): %v\n%s", err, out)
	}

	args := append(strings.Fields(quick[0]), serverArgs(t.TempDir())...)
	run := exec.Command(args[0], args[1:]...)
	run.Dir = filepath.Join("..", "..")
	p := startCommand(t, run, "")

	perPartitionError := regexp.MustCompile(`"errorCode": "ERROR_CODE_(\w+)"`)
	for _, c := range walk {
		if !strings.HasPrefix(c, "grpcurl ") {
			t.Fatalf("walk-through command %q is not a grpcurl call", c)
		}
		c = grpcurl + strings.TrimPrefix(c, "grpcurl")
		c = strings.ReplaceAll(c, "localhost:7070", p.grpcAddr)
		out, err := exec.Command("sh", "-c", c).CombinedOutput()
		if err != nil {
			t.Fatalf("%s\nfailed: %v\n%s", c, err, out)
		}
		for _, m := range perPartitionError.FindAllStringSubmatch(string(out), -1) {
			if m[1] != "NONE" {
				t.Errorf("%s\nanswered %s:\n%s", c, m[0], out)
			}
		}
		if !strings.Contains(c, " list") && !json.Valid(out) {
			t.Errorf("%s\ndid not print JSON:\n%s", c, out)
		}
	}
	// Ctrl-C in a terminal sends SIGINT to the foreground process group: go run and the server.
	// The server shuts down cleanly; go run itself always reports status 1 when interrupted, so
	// the server's own last log line is what tells (the binary's exit 0 is checked elsewhere).
	p.stop(syscall.SIGINT)
	if lines := strings.Split(strings.TrimSpace(p.log()), "\n"); !strings.Contains(lines[len(lines)-1], `"msg":"stopped"`) {
		t.Fatalf("the server did not stop cleanly after Ctrl-C:\n%s", p.log())
	}
}
