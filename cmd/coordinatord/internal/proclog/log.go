package proclog

import (
	"bufio"
	"io"
	"strings"
	"sync"
	"time"
)

// maxLine is the longest line kept whole; a longer one ends the reading (the rest of the output
// is drained and dropped).
const maxLine = 4 << 20

// Log is the lines read from one process's output. Its methods are safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	lines   []string
	newLine chan struct{} // closed and replaced whenever a line arrives or the output ends
	eof     bool
}

// New returns an empty Log; Read fills it.
func New() *Log { return &Log{newLine: make(chan struct{})} }

// Read keeps every line of r until r ends, handing each to each (nil: none) after keeping it.
// It returns once r ends.
func (l *Log) Read(r io.Reader, each func(line string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	defer func() {
		l.mu.Lock()
		l.eof = true
		close(l.newLine)
		l.mu.Unlock()
	}()
	for sc.Scan() {
		line := sc.Text()
		l.mu.Lock()
		l.lines = append(l.lines, line)
		close(l.newLine)
		l.newLine = make(chan struct{})
		l.mu.Unlock()
		if each != nil {
			each(line)
		}
	}
	_, _ = io.Copy(io.Discard, r) // after a line past maxLine: keep the writer from blocking
}

// Lines returns the lines kept so far.
func (l *Log) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines[:len(l.lines):len(l.lines)]
}

// String returns the lines kept so far, one per line.
func (l *Log) String() string { return strings.Join(l.Lines(), "\n") }

// Tail returns the last n lines kept so far, one per line.
func (l *Log) Tail(n int) string {
	lines := l.Lines()
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Wait waits until a line, already kept or still to come, satisfies match and returns it; false
// when the output ends or timeout passes first.
func (l *Log) Wait(timeout time.Duration, match func(line string) bool) (string, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for seen := 0; ; {
		l.mu.Lock()
		lines, next, eof := l.lines, l.newLine, l.eof
		l.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if match(lines[seen]) {
				return lines[seen], true
			}
		}
		if eof {
			return "", false
		}
		select {
		case <-next:
		case <-deadline.C:
			return "", false
		}
	}
}
