package pmap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// check compares m with the reference model want: length, every lookup, iteration, and the
// trie's shape (no node below the root holds a single key).
func check[V comparable](t *testing.T, m Map[V], want map[string]V, hash func(string) uint64) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("Len %d, want %d", m.Len(), len(want))
	}
	for k, v := range want {
		if got, ok := m.get(hash(k), k); !ok || got != v {
			t.Fatalf("get %q = %v, %v; want %v", k, got, ok, v)
		}
	}
	seen := map[string]V{}
	for k, v := range m.All() {
		if _, dup := seen[k]; dup {
			t.Fatalf("All yields %q twice", k)
		}
		seen[k] = v
	}
	if !maps.Equal(seen, want) {
		t.Fatalf("All yields %v, want %v", seen, want)
	}
	if m.root != nil {
		checkShape(t, m.root, 0, true)
	}
}

func checkShape[V any](t *testing.T, n *node[V], shift uint, root bool) {
	t.Helper()
	if !root && len(n.slots) == 1 && n.slots[0].child == nil {
		t.Fatalf("a node at level %d holds a single key %q", shift/bitsPerLevel, n.slots[0].key)
	}
	if shift < hashBits && len(n.slots) != popcount(n.bitmap) {
		t.Fatalf("a node at level %d has %d slots for bitmap %b", shift/bitsPerLevel, len(n.slots), n.bitmap)
	}
	for _, s := range n.slots {
		if s.child != nil {
			checkShape(t, s.child, shift+bitsPerLevel, false)
		}
	}
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// TestAgainstModel applies random updates, through Set, Delete and Builders, to a Map and to a
// Go map, with real hashes and with hashes narrowed so that keys collide at every level and in
// full, and checks that every version kept stays as it was when it was made.
func TestAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(string) uint64
		keys int
	}{
		{"maphash", hashOf, 2000},
		{"4 distinct hashes", func(k string) uint64 { return hashOf(k) & 3 << 60 }, 200},
		{"one hash", func(string) uint64 { return 42 }, 50},
		{"shared prefix", func(k string) uint64 { return hashOf(k)&0xff<<56 | 0x0123456789abcd }, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			type version struct {
				m    Map[int]
				want map[string]int
			}
			var versions []version
			m, want := Map[int]{}, map[string]int{}
			for step := range 3000 {
				key := fmt.Sprintf("k%d", rng.IntN(tc.keys))
				switch op := rng.IntN(10); {
				case op < 5:
					b := m.Builder()
					b.set(tc.hash(key), key, step)
					m = b.Map()
					want[key] = step
				case op < 8:
					b := m.Builder()
					b.delete(tc.hash(key), key)
					m = b.Map()
					delete(want, key)
				default: // a batch in one Builder, updating keys it set itself
					b := m.Builder()
					for j := range 20 {
						k := fmt.Sprintf("k%d", rng.IntN(tc.keys))
						if rng.IntN(3) == 0 {
							b.delete(tc.hash(k), k)
							delete(want, k)
						} else {
							b.set(tc.hash(k), k, step*100+j)
							want[k] = step*100 + j
						}
					}
					m = b.Map()
					// The Builder goes on without changing what it returned.
					b.set(tc.hash("after"), "after", -1)
				}
				if step%100 == 0 {
					versions = append(versions, version{m, maps.Clone(want)})
				}
			}
			check(t, m, want, tc.hash)
			for _, v := range versions {
				check(t, v.m, v.want, tc.hash)
			}
			// Deleting everything leaves an empty map.
			b := m.Builder()
			for k := range want {
				b.delete(tc.hash(k), k)
			}
			check(t, b.Map(), map[string]int{}, tc.hash)
		})
	}
}

func TestZeroAndPublicMethods(t *testing.T) {
	var m Map[string]
	if _, ok := m.Get("a"); ok || m.Len() != 0 {
		t.Fatal("the zero Map is not empty")
	}
	for range m.All() {
		t.Fatal("the zero Map yields a key")
	}
	if d := m.Delete("a"); d.Len() != 0 {
		t.Fatal("Delete on the zero Map")
	}
	a := m.Set("a", "1")
	b := a.Set("b", "2").Set("a", "3")
	c := b.Delete("a").Delete("missing")
	if v, _ := a.Get("a"); v != "1" || a.Len() != 1 {
		t.Fatalf("a changed: %v", a)
	}
	if v, _ := b.Get("a"); v != "3" || b.Len() != 2 {
		t.Fatalf("b: %v", b)
	}
	if _, ok := c.Get("a"); ok || c.Len() != 1 {
		t.Fatalf("c: %v", c)
	}
	bl := c.Builder()
	bl.Set("x", "y")
	if v, ok := bl.Get("x"); !ok || v != "y" || bl.Len() != 2 {
		t.Fatal("Builder.Get does not see its own Set")
	}
	for k := range bl.Map().All() {
		if k == "b" {
			break // stopping early is allowed
		}
	}
}

func TestGetDoesNotAllocate(t *testing.T) {
	b := Map[*int]{}.Builder()
	for i := range 100000 {
		b.Set(fmt.Sprintf("group-%d", i), &i)
	}
	m := b.Map()
	if n := testing.AllocsPerRun(1000, func() { m.Get("group-4242"); m.Get("absent") }); n != 0 {
		t.Fatalf("Get allocates %v times", n)
	}
}

func BenchmarkGet(b *testing.B) {
	for _, n := range []int{1, 10000, 100000} {
		bl := Map[int]{}.Builder()
		keys := make([]string, n)
		for i := range n {
			keys[i] = fmt.Sprintf("group-%d", i)
			bl.Set(keys[i], i)
		}
		m := bl.Map()
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				m.Get(keys[i%n])
				i++
			}
		})
	}
}

func BenchmarkSet(b *testing.B) {
	for _, n := range []int{1, 10000, 100000} {
		bl := Map[int]{}.Builder()
		for i := range n {
			bl.Set(fmt.Sprintf("group-%d", i), i)
		}
		m := bl.Map()
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Set("hot", 1)
			}
		})
	}
}
