package proclog

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestWaitSeesLinesKeptAndToCome(t *testing.T) {
	r, w := io.Pipe()
	l := New()
	var handed []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Read(r, func(line string) { handed = append(handed, line) })
	}()
	if _, err := io.WriteString(w, "one\ntwo\n"); err != nil {
		t.Fatal(err)
	}
	if got, ok := l.Wait(time.Minute, func(s string) bool { return s == "two" }); !ok || got != "two" {
		t.Fatalf("Wait for a line written: %q, %v", got, ok)
	}
	found := make(chan bool)
	go func() {
		_, ok := l.Wait(time.Minute, func(s string) bool { return strings.HasPrefix(s, "thr") })
		found <- ok
	}()
	if _, err := io.WriteString(w, "three\n"); err != nil {
		t.Fatal(err)
	}
	if !<-found {
		t.Fatal("Wait missed a line written while it waited")
	}
	if _, ok := l.Wait(10*time.Millisecond, func(s string) bool { return s == "four" }); ok {
		t.Fatal("Wait found a line never written")
	}
	_ = w.Close()
	<-done
	if _, ok := l.Wait(time.Minute, func(s string) bool { return s == "four" }); ok {
		t.Fatal("Wait found a line after the output ended")
	}
	if got, want := l.String(), "one\ntwo\nthree"; got != want {
		t.Fatalf("String: %q, want %q", got, want)
	}
	if got := l.Tail(2); got != "two\nthree" {
		t.Fatalf("Tail(2): %q", got)
	}
	if strings.Join(handed, ",") != "one,two,three" {
		t.Fatalf("handed %v", handed)
	}
}

func TestALineTooLongEndsTheReadingNotTheWriter(t *testing.T) {
	r, w := io.Pipe()
	l := New()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Read(r, nil)
	}()
	go func() {
		_, _ = io.WriteString(w, "short\n"+strings.Repeat("x", maxLine+1)+"\nafter\n")
		_ = w.Close()
	}()
	<-done
	if got := l.String(); got != "short" {
		t.Fatalf("kept %q, want the lines before the long one", got)
	}
}
