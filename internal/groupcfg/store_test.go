package groupcfg

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// storeWithRecords returns the bytes of a store file holding a snapshot and three change
// records (g=3, g=4, h=5 on share.delivery.count.limit), and the offsets where each record
// starts.
func storeWithRecords(t *testing.T) ([]byte, []int) {
	t.Helper()
	dir := t.TempDir()
	f := openFixture(t, dir, staticOf(t))
	var starts []int
	for _, r := range []AlterResource{
		groupRes("g", set(keyDeliveryCountLimit, "3")),
		groupRes("g", set(keyDeliveryCountLimit, "4")),
		groupRes("h", set(keyDeliveryCountLimit, "5")),
	} {
		fi, err := os.Stat(storePath(dir))
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, int(fi.Size()))
		f.mustAlter(t, r)
	}
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(storePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return data, starts
}

// writeStoreFile puts data in the store file of a new directory and returns the directory.
func writeStoreFile(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/config", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(storePath(dir), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTornChangeRecord cuts and blanks the last change record of a store file as an append that
// a crash interrupted leaves it: open drops it with a WARN, keeps every earlier change, and the
// next change rewrites the file so that later appends never follow the torn bytes.
func TestTornChangeRecord(t *testing.T) {
	good, starts := storeWithRecords(t)
	last := starts[2]
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"header cut", good[:last+3]},
		{"header without its newline", good[:last+strings.IndexByte(string(good[last:]), '\n')]},
		{"body cut", good[:len(good)-10]},
		{"body without its newline", good[:len(good)-1]},
		{"zeros", append(bytes.Clone(good[:last]), make([]byte, len(good)-last)...)},
		{"last byte of the body changed", append(bytes.Clone(good[:len(good)-2]), '!', '\n')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeStoreFile(t, tc.data)
			f := openFixture(t, dir, staticOf(t))
			if g, h := f.m.groupInt("g", keyDeliveryCountLimit), f.m.groupInt("h", keyDeliveryCountLimit); g != 4 || h != 5 {
				t.Fatalf("after the torn record: g %d, h %d; want g 4 (the records before it) and h unset (5)", g, h)
			}
			if w := f.logs.FilterMessageSnippet("dropped an unfinished change").All(); len(w) != 1 || w[0].ContextMap()["offset"] != int64(last) {
				t.Fatalf("WARN logs %+v, want one naming offset %d", w, last)
			}
			f.mustAlter(t, groupRes("h", set(keyDeliveryCountLimit, "6")))
			f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "7")))
			if err := f.m.Close(); err != nil {
				t.Fatal(err)
			}
			r := openFixture(t, dir, staticOf(t))
			if g, h := r.m.groupInt("g", keyDeliveryCountLimit), r.m.groupInt("h", keyDeliveryCountLimit); g != 7 || h != 6 {
				t.Fatalf("after reopen: g %d, h %d; want 7 and 6", g, h)
			}
			if n := r.logs.FilterMessageSnippet("dropped an unfinished change").Len(); n != 0 {
				t.Fatalf("the torn bytes are still there after the next change (%d WARN logs)", n)
			}
		})
	}
}

// TestDamagedChangeRecord damages a change record that other records follow, or adds bytes that
// no append leaves: start-up stops with a *StoreError naming the file and the byte offset.
func TestDamagedChangeRecord(t *testing.T) {
	good, starts := storeWithRecords(t)
	mid, midEnd := starts[1], starts[2]
	midBody := mid + bytes.IndexByte(good[mid:], '\n') + 1
	// reframe replaces the middle record by one with body b and a correct header.
	reframe := func(b string) []byte {
		rec := fmt.Sprintf("%s %d %08x\n%s", recordMagic, len(b), crc32.Checksum([]byte(b), castagnoli), b)
		return concat(good[:mid], []byte(rec), good[midEnd:])
	}
	flipped := bytes.Clone(good)
	flipped[midBody+3] ^= 0x20
	badHeader := bytes.Clone(good)
	badHeader[mid+len(recordMagic)-1] = '!'
	fields := strings.Fields(string(good[mid:midBody]))
	badLength := concat(good[:mid], []byte(fields[0]+" x "+fields[2]+"\n"), good[midBody:])
	for _, tc := range []struct {
		name, reason string
		data         []byte
	}{
		{"checksum mismatch", "checksum mismatch", flipped},
		{"bad header", "bad change record header", badHeader},
		{"bad length", "bad change record length", badLength},
		{"bad contents", "bad change record contents", reframe("{\"generation\": 3, \"nope\": 1}\n")},
		{"empty group id", "empty group id", reframe("{\"generation\": 3, \"groups\": {\"\": {\"a\": \"b\"}}}\n")},
		{"generation gap", "makes generation 9, but follows generation 2", reframe("{\"generation\": 9}\n")},
		{"garbage after the records", "unexpected bytes", append(bytes.Clone(good), "garbage"...)},
		{"garbage line after the records", "unexpected bytes", append(bytes.Clone(good), "garbage\n{}\n"...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeStoreFile(t, tc.data)
			_, err := tryOpen(t, dir, staticOf(t), vfs.OS())
			var se *StoreError
			if !errors.As(err, &se) || se.Newer {
				t.Fatalf("open: %v, want a *StoreError for damage", err)
			}
			if se.Path != storePath(dir) || !strings.Contains(se.Reason, tc.reason) || !strings.Contains(se.Reason, "at byte offset") {
				t.Fatalf("error %q: want the path, a byte offset and %q", err, tc.reason)
			}
		})
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// legacyStore renders st in the format of earlier releases (version 1): a snapshot, nothing
// after it.
func legacyStore(t *testing.T, st *storeState) []byte {
	t.Helper()
	data, err := encodeStore(st)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(data, fmt.Appendf(nil, "%s %d ", storeMagic, storeVersion), fmt.Appendf(nil, "%s %d ", storeMagic, legacyVersion), 1)
}

var legacyState = storeState{NumPartitions: 50, Generation: 4,
	Broker: map[string]string{keySnapshotCeiling: "800"},
	Groups: map[string]map[string]string{"g": {keyDeliveryCountLimit: "7"}, "h": {keyGroupSnapshotLimit: "300"}}}

// TestLegacyStoreConverted opens a store of the earlier format: its values apply, the file is
// rewritten in the current format (once), and changes append to it.
func TestLegacyStoreConverted(t *testing.T) {
	dir := writeStoreFile(t, legacyStore(t, &legacyState))
	f := openFixture(t, dir, staticOf(t))
	checkLegacyValues(t, f.m)
	if n := f.logs.FilterMessageSnippet("converted the config store").Len(); n != 1 {
		t.Fatalf("%d conversion logs, want 1", n)
	}
	data, err := os.ReadFile(storePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, fmt.Appendf(nil, "%s %d ", storeMagic, storeVersion)) {
		t.Fatalf("the store was not rewritten in version %d: %.40q", storeVersion, data)
	}
	if st := readStore(t, dir); st.Generation != 4 {
		t.Fatalf("conversion changed the generation to %d", st.Generation)
	}
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "8")))
	_ = f.m.Close()
	r := openFixture(t, dir, staticOf(t))
	if n := r.logs.FilterMessageSnippet("converted the config store").Len(); n != 0 {
		t.Fatal("the store was converted again")
	}
	if got := r.m.groupInt("g", keyDeliveryCountLimit); got != 8 {
		t.Fatalf("g %d after a change and a reopen, want 8", got)
	}
}

func checkLegacyValues(t *testing.T, m *Manager) {
	t.Helper()
	if g, h, ceiling := m.groupInt("g", keyDeliveryCountLimit), m.SnapshotUpdateRecordsPerSnapshot("h"), m.Broker().SnapshotUpdateRecordsPerSnapshot(); g != 7 || h != 300 || ceiling != 800 {
		t.Fatalf("g %d, h %d, ceiling %d; want the stored 7, 300 and 800", g, h, ceiling)
	}
}

// TestCrashDuringConversion fails the conversion of a store of the earlier format at every
// filesystem operation in turn, as a crash there would: reopening after a process crash or a
// power cut finds the stored values, in either format.
func TestCrashDuringConversion(t *testing.T) {
	legacy := legacyStore(t, &legacyState)
	sawOpen := false
	for step := int64(1); !sawOpen; step++ {
		mem := newDataFS(t)
		if err := mem.MkdirAll("/data/config"); err != nil {
			t.Fatal(err)
		}
		w, err := mem.Create(storePath("/data"))
		if err == nil {
			_, err = w.WriteAt(legacy, 0)
		}
		if err == nil {
			err = w.Sync()
		}
		if err == nil {
			err = w.Close()
		}
		if err == nil {
			err = mem.SyncDir("/data/config")
		}
		if err == nil {
			err = mem.SyncDir("/data")
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := tryOpen(t, "/data", staticOf(t), faultfs.Wrap(mem, dieAt(step)))
		if err == nil {
			sawOpen = true
			checkLegacyValues(t, f.m)
		}
		for name, after := range map[string]*faultfs.CrashFS{
			"process crash": mem,
			"power cut":     mem.CrashClone(faultfs.CrashOptions{}),
		} {
			r, err := tryOpen(t, "/data", staticOf(t), after)
			if err != nil {
				t.Fatalf("step %d, %s: reopen: %v", step, name, err)
			}
			checkLegacyValues(t, r.m)
		}
	}
}

// TestStoreCompacts makes many changes: the change records never grow past their allowance
// (the snapshot's size, and at least the compaction threshold), each rewrite keeps every value,
// and a reopen finds the last one.
func TestStoreCompacts(t *testing.T) {
	dir := t.TempDir()
	const threshold = 4096
	f, err := tryOpenWith(t, dir, staticOf(t), vfs.OS(), Options{NodeID: 1, compactBytes: threshold})
	if err != nil {
		t.Fatal(err)
	}
	rewrites := 0
	size := int64(0)
	for i := range 300 {
		f.mustAlter(t, groupRes(fmt.Sprintf("group-%d", i%40), set(keyDeliveryCountLimit, fmt.Sprint(2+i/40%8))))
		fi, err := os.Stat(storePath(dir))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < size {
			rewrites++
		}
		size = fi.Size()
		if s := f.m.store; s.end-s.snapshot > max(threshold, s.snapshot) {
			t.Fatalf("change %d: %d bytes of change records after a snapshot of %d", i, s.end-s.snapshot, s.snapshot)
		}
	}
	if rewrites == 0 {
		t.Fatal("the store was never rewritten")
	}
	_ = f.m.Close()
	r := openFixture(t, dir, staticOf(t))
	for g := range 40 {
		last := g + (299-g)/40*40 // the last change of group g
		if got := r.m.groupInt(fmt.Sprintf("group-%d", g), keyDeliveryCountLimit); got != 2+last/40%8 {
			t.Fatalf("group-%d: %d after reopen, want %d", g, got, 2+last/40%8)
		}
	}
	t.Logf("%d rewrites in 300 changes", rewrites)
}
