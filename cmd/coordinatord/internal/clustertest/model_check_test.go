package clustertest

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestModelCatchesViolations checks the checker: porcupine with shareStateModel accepts the
// histories a correct coordinator can produce and rejects stale reads, lost writes, a start
// offset that moved back and writes applied out of thin air.
func TestModelCatchesViolations(t *testing.T) {
	w := func(key int, start, offset, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: opInput{kind: opWrite, key: key, start: start, offset: offset}, Output: opOutput{}, Call: call, Return: ret}
	}
	failed := func(key int, start, offset, call int64) porcupine.Operation {
		return porcupine.Operation{Input: opInput{kind: opWrite, key: key, start: start, offset: offset},
			Output: opOutput{ambiguous: true}, Call: call, Return: math.MaxInt64}
	}
	r := func(key int, start int64, offsets []int64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: opInput{kind: opRead, key: key}, Output: opOutput{start: start, offsets: offsets}, Call: call, Return: ret}
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"sequential", []porcupine.Operation{w(0, 0, 1, 0, 1), w(0, 0, 2, 2, 3), r(0, 0, []int64{1, 2}, 4, 5)}, true},
		{"concurrent read sees either", []porcupine.Operation{w(0, 0, 1, 0, 10), r(0, 0, nil, 1, 2), r(0, 0, []int64{1}, 3, 4)}, true},
		{"stale read", []porcupine.Operation{w(0, 0, 1, 0, 1), w(0, 0, 2, 2, 3), r(0, 0, []int64{1}, 4, 5)}, false},
		{"lost write", []porcupine.Operation{w(0, 0, 1, 0, 1), r(0, 0, nil, 2, 3)}, false},
		{"value read back vanishes", []porcupine.Operation{w(0, 0, 1, 0, 10), r(0, 0, []int64{1}, 1, 2), r(0, 0, nil, 3, 4)}, false},
		{"failed write never applied", []porcupine.Operation{failed(0, 0, 1, 0), r(0, 0, nil, 2, 3)}, true},
		{"failed write applied late", []porcupine.Operation{failed(0, 0, 1, 0), r(0, 0, nil, 2, 3), r(0, 0, []int64{1}, 4, 5)}, true},
		{"failed write applied, then gone", []porcupine.Operation{failed(0, 0, 1, 0), r(0, 0, []int64{1}, 2, 3), r(0, 0, nil, 4, 5)}, false},
		{"write out of thin air", []porcupine.Operation{w(0, 0, 1, 0, 1), r(0, 0, []int64{1, 7}, 2, 3)}, false},
		{"start offset is the max", []porcupine.Operation{w(0, 4, 6, 0, 1), w(0, 0, 5, 2, 3), r(0, 4, []int64{5, 6}, 4, 5)}, true},
		{"start offset moved back", []porcupine.Operation{w(0, 4, 6, 0, 1), w(0, 0, 5, 2, 3), r(0, 0, []int64{5, 6}, 4, 5)}, false},
		{"batch below the start dropped", []porcupine.Operation{w(0, 10, 12, 0, 1), w(0, 0, 3, 2, 3), r(0, 10, []int64{12}, 4, 5)}, true},
		{"batch below the start kept", []porcupine.Operation{w(0, 10, 12, 0, 1), w(0, 0, 3, 2, 3), r(0, 10, []int64{3, 12}, 4, 5)}, false},
		{"offsets pruned by a later start", []porcupine.Operation{w(0, 0, 3, 0, 1), w(0, 5, 9, 2, 3), r(0, 5, []int64{9}, 4, 5)}, true},
		{"keys are separate", []porcupine.Operation{w(0, 0, 1, 0, 1), w(1, 0, 2, 0, 1), r(0, 0, []int64{1}, 2, 3), r(1, 0, []int64{2}, 2, 3)}, true},
		{"a key sees another's write", []porcupine.Operation{w(0, 0, 1, 0, 1), r(1, 0, []int64{1}, 2, 3)}, false},
		{"odd batch", []porcupine.Operation{{Input: opInput{kind: opRead}, Output: opOutput{odd: "state 0"}, Call: 0, Return: 1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(shareStateModel, tc.ops); got != tc.ok {
				t.Errorf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}

func TestApplyWrite(t *testing.T) {
	s := keyState{}.applyWrite(0, 3).applyWrite(0, 1).applyWrite(0, 3)
	if want := (keyState{start: 0, offsets: []int64{1, 3}}); !s.equal(want) {
		t.Fatalf("got %v, want %v", s, want)
	}
	before := s
	s2 := s.applyWrite(2, 5)
	if want := (keyState{start: 2, offsets: []int64{3, 5}}); !s2.equal(want) {
		t.Fatalf("got %v, want %v", s2, want)
	}
	if !s.equal(before) {
		t.Fatalf("applyWrite changed its receiver: %v", s)
	}
	if got := offsetList([]int64{1, 2, 3, 5, 7, 8}); got != "{1-3, 5, 7-8}" {
		t.Fatalf("offsetList: %s", got)
	}
}

// TestVisualizationOfAViolation writes porcupine's visualization of a history that is not
// linearizable, as a failing fault test does, and finds the operations in it.
func TestVisualizationOfAViolation(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 1, Input: opInput{kind: opWrite, key: 0, start: 0, offset: 1}, Output: opOutput{}, Call: 0, Return: 1},
		{ClientId: 2, Input: opInput{kind: opWrite, key: 0, start: 0, offset: 2}, Output: opOutput{ambiguous: true}, Call: 0, Return: math.MaxInt64},
		{ClientId: 1, Input: opInput{kind: opRead, key: 0}, Output: opOutput{start: 0, offsets: nil}, Call: 2, Return: 3},
	}
	res, info := porcupine.CheckOperationsVerbose(shareStateModel, ops, time.Minute)
	if res != porcupine.Illegal {
		t.Fatalf("check: %v, want Illegal", res)
	}
	path := filepath.Join(t.TempDir(), "linearizability.html")
	if err := porcupine.VisualizePath(shareStateModel, info, path); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"write(key 0, start 0, offset 1) → ok", "failed: applied or not", "read(key 0) → start 0 {}"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the visualization does not show %q", want)
		}
	}
}
