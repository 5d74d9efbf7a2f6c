package groupcfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coordinatord/coordinatord/internal/vfs"
)

// On-disk names and format constants. They are part of the format: see doc.go.
const (
	// tmpSuffix makes the name of a rewrite in progress from the store's: store.tmp.
	tmpSuffix    = ".tmp"
	storeMagic   = "coordinatord-config"
	storeVersion = 2
	// legacyVersion is the format of earlier releases: a snapshot and no change records. Open
	// reads it and rewrites the store in storeVersion.
	legacyVersion = 1
	// recordMagic starts the header line of every change record.
	recordMagic = "change"
	// maxHeaderLen bounds the header line of the store and of a change record; a longer first
	// line is damage, not a header.
	maxHeaderLen = 64
)

// defaultCompactBytes is how many bytes of change records the store lets accumulate, at least,
// before a change rewrites it as one snapshot; it may hold as many as its snapshot takes, so
// that reading the records back costs no more than reading the snapshot.
const defaultCompactBytes = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// storeState is everything the config store keeps, as its snapshot holds it and as it is read
// back. Values are canonical text, as validated when they were set.
type storeState struct {
	NumPartitions int                          `json:"num_partitions"`
	Generation    uint64                       `json:"generation"`
	Broker        map[string]string            `json:"broker"`
	Groups        map[string]map[string]string `json:"groups"`
}

// storeRecord is one change record: a change and the generation it makes.
type storeRecord struct {
	Generation uint64 `json:"generation"`
	change
}

// StoreError says that the config store file is damaged, or of a format version this release
// does not read (Newer). It stops start-up.
type StoreError struct {
	Path   string
	Reason string
	// Newer reports a store whose header is intact but names a later format version: a newer
	// release wrote it, and it is not damaged.
	Newer bool
}

// Error names the file, what is wrong and what to do.
func (e *StoreError) Error() string {
	if e.Newer {
		return fmt.Sprintf("config store %s was written by a newer coordinatord: %s; run that release or a later one "+
			"(moving the file away would drop the dynamic broker configs and group overrides it holds)", e.Path, e.Reason)
	}
	return fmt.Sprintf("config store %s is damaged: %s; restore it from a backup, or move it away to start "+
		"without dynamic broker configs and group overrides (share.coordinator.state.topic.num.partitions is then "+
		"recorded again and must equal the value the data directory was created with)", e.Path, e.Reason)
}

// encodeStore renders st as a store file without change records: the header line, then the JSON
// body of the snapshot.
func encodeStore(st *storeState) ([]byte, error) {
	body, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode config store: %w", err)
	}
	body = append(body, '\n')
	header := fmt.Sprintf("%s %d %d %08x\n", storeMagic, storeVersion, len(body), crc32.Checksum(body, castagnoli))
	return append([]byte(header), body...), nil
}

// encodeRecord renders one change record: its header line, then its JSON body on one line.
func encodeRecord(r *storeRecord) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode config change record: %w", err)
	}
	body = append(body, '\n')
	header := fmt.Sprintf("%s %d %08x\n", recordMagic, len(body), crc32.Checksum(body, castagnoli))
	return append([]byte(header), body...), nil
}

// loadedStore is what reading a store file found.
type loadedStore struct {
	state *storeState
	// version is the format version of the file (legacyVersion: to be rewritten).
	version int
	// snapshot is the length of the header and the snapshot body; end that of the file up to the
	// end of its last intact change record, where the next one goes.
	snapshot, end int64
	// torn is the length of an unfinished change record after end (an append that a crash
	// interrupted, never acknowledged), dropped.
	torn int64
}

// decodeStore parses and checks a store file read from path and returns the state it holds: its
// snapshot with its change records applied.
func decodeStore(path string, data []byte) (*storeState, error) {
	l, err := loadStore(path, data)
	if err != nil {
		return nil, err
	}
	return l.state, nil
}

// loadStore parses and checks a store file read from path.
func loadStore(path string, data []byte) (*loadedStore, error) {
	damaged := func(format string, args ...any) error {
		return &StoreError{Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return nil, damaged("the file is empty")
	}
	nl := bytes.IndexByte(data[:min(len(data), maxHeaderLen)], '\n')
	if nl < 0 {
		return nil, damaged("no header line (expected %q)", storeMagic+" <version> <length> <crc32c>")
	}
	fields := strings.Split(string(data[:nl]), " ")
	if len(fields) != 4 || fields[0] != storeMagic {
		return nil, damaged("bad header %q (expected %q)", data[:nl], storeMagic+" <version> <length> <crc32c>")
	}
	version, err := strconv.Atoi(fields[1])
	if err != nil {
		return nil, damaged("bad format version %q", fields[1])
	}
	length, err := strconv.Atoi(fields[2])
	if err != nil || length < 0 {
		return nil, damaged("bad body length %q", fields[2])
	}
	sum, err := strconv.ParseUint(fields[3], 16, 32)
	if err != nil || len(fields[3]) != 8 {
		return nil, damaged("bad checksum field %q", fields[3])
	}
	rest := data[nl+1:]
	if len(rest) < length {
		return nil, damaged("truncated: the header announces %d bytes after it, the file has %d", length, len(rest))
	}
	body := rest[:length]
	if got := crc32.Checksum(body, castagnoli); got != uint32(sum) {
		return nil, damaged("checksum mismatch: header says %08x, contents hash to %08x", sum, got)
	}
	// The version is judged only in a snapshot whose length and checksum hold: a damaged digit of
	// the version must not pass for a newer release's store (whose advice is to keep the file).
	switch {
	case version > storeVersion:
		return nil, &StoreError{Path: path, Newer: true, Reason: fmt.Sprintf("format version %d, but this release reads "+
			"version %d (and version %d, which it converts)", version, storeVersion, legacyVersion)}
	case version != storeVersion && version != legacyVersion:
		return nil, damaged("format version %d, but this release reads version %d (and version %d, which it converts)",
			version, storeVersion, legacyVersion)
	case version == legacyVersion && len(rest) > length:
		return nil, damaged("%d unexpected bytes after the %d announced by the header", len(rest)-length, length)
	}
	st, err := decodeSnapshot(body)
	if err != nil {
		return nil, damaged("%v", err)
	}
	l := &loadedStore{state: st, version: version, snapshot: int64(nl + 1 + length)}
	if err := l.replay(data); err != nil {
		return nil, damaged("%v", err)
	}
	return l, nil
}

// decodeSnapshot parses and checks the JSON body of a snapshot. The state's maps are never nil.
func decodeSnapshot(body []byte) (*storeState, error) {
	var st storeState
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("bad contents: %v", err)
	}
	if dec.More() {
		return nil, errors.New("bad contents: more than one JSON value")
	}
	if st.NumPartitions < 1 {
		return nil, fmt.Errorf("recorded share.coordinator.state.topic.num.partitions is %d", st.NumPartitions)
	}
	if st.Broker == nil {
		st.Broker = map[string]string{}
	}
	if st.Groups == nil {
		st.Groups = map[string]map[string]string{}
	}
	for group, overrides := range st.Groups {
		if group == "" {
			return nil, errors.New("an override set for an empty group id")
		}
		if len(overrides) == 0 {
			delete(st.Groups, group)
		}
	}
	return &st, nil
}

// replay applies the change records that follow the snapshot to l.state, in order. An
// unfinished record at the end of the file is an append that never completed: it is dropped
// (l.torn). Any other damage is an error naming the byte offset.
func (l *loadedStore) replay(data []byte) error {
	off := l.snapshot
	for off < int64(len(data)) {
		n, r, err := nextRecord(data[off:])
		switch {
		case errors.Is(err, errTornRecord):
			l.torn = int64(len(data)) - off
			l.end = off
			return nil
		case err != nil:
			return fmt.Errorf("at byte offset %d: %v", off, err)
		case r.Generation != l.state.Generation+1:
			return fmt.Errorf("change record at byte offset %d makes generation %d, but follows generation %d",
				off, r.Generation, l.state.Generation)
		}
		l.state.apply(r)
		off += n
	}
	l.end = off
	return nil
}

// errTornRecord marks the bytes at the end of a store file as a change record whose append did
// not complete.
var errTornRecord = errors.New("torn change record")

// nextRecord parses the change record at the start of b and returns its length. b runs to the
// end of the file: a record that does not fit in it, one that is all zeros (a file whose length
// reached the disk before its data) and one whose checksum fails at the very end are torn.
func nextRecord(b []byte) (int64, *storeRecord, error) {
	if b[0] == 0 && len(bytes.TrimLeft(b, "\x00")) == 0 {
		return 0, nil, errTornRecord
	}
	head := b[:min(len(b), maxHeaderLen)]
	nl := bytes.IndexByte(head, '\n')
	prefix := recordMagic + " "
	if nl < 0 {
		if len(b) < maxHeaderLen && strings.HasPrefix(prefix, string(b[:min(len(b), len(prefix))])) {
			return 0, nil, errTornRecord
		}
		return 0, nil, fmt.Errorf("%d unexpected bytes where a change record (%q) should start", len(b), recordMagic+" <length> <crc32c>")
	}
	fields := strings.Split(string(head[:nl]), " ")
	if len(fields) != 3 || fields[0] != recordMagic {
		return 0, nil, fmt.Errorf("%d unexpected bytes: bad change record header %q (expected %q)", len(b), head[:nl], recordMagic+" <length> <crc32c>")
	}
	length, err := strconv.Atoi(fields[1])
	if err != nil || length < 1 {
		return 0, nil, fmt.Errorf("bad change record length %q", fields[1])
	}
	sum, err := strconv.ParseUint(fields[2], 16, 32)
	if err != nil || len(fields[2]) != 8 {
		return 0, nil, fmt.Errorf("bad change record checksum field %q", fields[2])
	}
	body := b[nl+1:]
	if len(body) < length {
		return 0, nil, errTornRecord
	}
	body = body[:length]
	if got := crc32.Checksum(body, castagnoli); got != uint32(sum) {
		if nl+1+length == len(b) {
			return 0, nil, errTornRecord
		}
		return 0, nil, fmt.Errorf("change record checksum mismatch: header says %08x, contents hash to %08x", sum, got)
	}
	var r storeRecord
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return 0, nil, fmt.Errorf("bad change record contents: %v", err)
	}
	if dec.More() {
		return 0, nil, errors.New("bad change record contents: more than one JSON value")
	}
	if _, ok := r.Groups[""]; ok {
		return 0, nil, errors.New("a change record sets overrides for an empty group id")
	}
	return int64(nl + 1 + length), &r, nil
}

// apply applies a change record to st.
func (st *storeState) apply(r *storeRecord) {
	for group, overrides := range r.Groups {
		if len(overrides) == 0 {
			delete(st.Groups, group)
		} else {
			st.Groups[group] = overrides
		}
	}
	if r.BrokerSet {
		st.Broker = r.Broker
		if st.Broker == nil {
			st.Broker = map[string]string{}
		}
	}
	st.Generation = r.Generation
}

// errStoreFailed marks a write refused because an earlier one left the store file uncertain.
var errStoreFailed = errors.New("config store failed")

// store keeps a storeState durable in one file: a snapshot followed by change records, appended
// one per change and fsynced; now and then a change rewrites the file as a new snapshot, replaced
// atomically. It is used by one goroutine at a time (the Manager's admin lock).
type store struct {
	fs   vfs.FS
	path string // the store file
	dir  string // its directory
	tmp  string // the file a rewrite is written to before it replaces path
	// f is the store file, open to append change records; nil when the next change must
	// rewrite the file instead (after a failed append, or with a torn record at its end).
	f vfs.File
	// snapshot is the length of the file's header and snapshot, end that of the file up to its
	// last change record.
	snapshot, end int64
	// compactBytes: see defaultCompactBytes; negative makes every change rewrite the file.
	compactBytes int64
	// failed is sticky: once an fsync or the replacement itself failed, what is on disk is
	// uncertain, so every later write is refused until a restart reloads the file.
	failed error
}

// openStore prepares the directory of the store file path and loads the file (nil state when
// there is none). A leftover temporary file is a rewrite that never completed (and was never
// acknowledged): it is removed. A store of the legacy format is rewritten in the current one.
func openStore(fsys vfs.FS, path string, compactBytes int64) (*store, *loadedStore, error) {
	s := &store{fs: fsys, path: path, dir: filepath.Dir(path), tmp: path + tmpSuffix, compactBytes: compactBytes}
	if err := fsys.MkdirAll(s.dir); err != nil {
		return nil, nil, fmt.Errorf("create config store directory %s: %w", s.dir, err)
	}
	tmp := s.tmp
	switch err := fsys.Remove(tmp); {
	case err == nil:
		if err := fsys.SyncDir(s.dir); err != nil {
			return nil, nil, fmt.Errorf("sync config store directory %s: %w", s.dir, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("remove unfinished config store update %s: %w", tmp, err)
	}
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read config store %s: %w", path, err)
	}
	l, err := loadStore(path, data)
	if err != nil {
		return nil, nil, err
	}
	s.snapshot, s.end = l.snapshot, l.end
	switch {
	case l.version == legacyVersion:
		if err := s.rewrite(l.state); err != nil {
			return nil, nil, fmt.Errorf("convert config store %s to format version %d: %w", path, storeVersion, err)
		}
	case l.torn == 0:
		if s.f, err = fsys.OpenReadWrite(path); err != nil {
			return nil, nil, fmt.Errorf("open config store %s: %w", path, err)
		}
	}
	return s, l, nil
}

// commit makes the change record r durable: it appends r to the store file and fsyncs it, or,
// when the records have grown past their allowance (or the file cannot be appended to), rewrites
// the file with full(), the whole state r leads to. On error r must not be treated as
// acknowledged.
func (s *store) commit(r *storeRecord, full func() *storeState) error {
	if s.failed != nil {
		return fmt.Errorf("%w: config store %s failed earlier (%v); restart coordinatord to recover", errStoreFailed, s.path, s.failed)
	}
	data, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if s.f == nil || s.compactBytes < 0 || s.end-s.snapshot+int64(len(data)) > max(s.compactBytes, s.snapshot) {
		return s.rewrite(full())
	}
	if _, err := s.f.WriteAt(data, s.end); err != nil {
		// What part of the record reached the file is unknown: the next change rewrites it.
		s.closeFile()
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		s.failed = fmt.Errorf("fsync %s: %w", s.path, err)
		return s.failed
	}
	s.end += int64(len(data))
	return nil
}

// rewrite replaces the store file with a snapshot of st and returns once the new file is durable:
// it writes a temporary file, fsyncs it, renames it over the store file and fsyncs the directory.
// On error the store file holds the old state (or, if only the final directory fsync failed,
// possibly the new one), and st must not be treated as acknowledged.
func (s *store) rewrite(st *storeState) error {
	if s.failed != nil {
		return fmt.Errorf("%w: config store %s failed earlier (%v); restart coordinatord to recover", errStoreFailed, s.path, s.failed)
	}
	data, err := encodeStore(st)
	if err != nil {
		return err
	}
	tmp := s.tmp
	discard := func() { _ = s.fs.Remove(tmp) }
	f, err := s.createTmp(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		discard()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		discard()
		s.failed = fmt.Errorf("fsync %s: %w", tmp, err)
		return s.failed
	}
	if err := f.Close(); err != nil {
		discard()
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := s.fs.Rename(tmp, s.path); err != nil {
		discard()
		return fmt.Errorf("rename %s to %s: %w", tmp, s.path, err)
	}
	s.closeFile()
	if err := s.fs.SyncDir(s.dir); err != nil {
		s.failed = fmt.Errorf("fsync directory %s: %w", s.dir, err)
		return s.failed
	}
	s.snapshot, s.end = int64(len(data)), int64(len(data))
	// The change is durable now. Should the file not open for appends, the next change rewrites
	// it again.
	if f, err := s.fs.OpenReadWrite(s.path); err == nil {
		s.f = f
	}
	return nil
}

// createTmp creates the temporary file of a rewrite. One left by a rewrite whose clean-up failed
// too is replaced: it was never acknowledged.
func (s *store) createTmp(tmp string) (vfs.File, error) {
	f, err := s.fs.Create(tmp)
	if errors.Is(err, fs.ErrExist) {
		if err = s.fs.Remove(tmp); err == nil {
			f, err = s.fs.Create(tmp)
		}
	}
	return f, err
}

// closeFile closes the file appends go to; the next change rewrites the store file. The records
// appended so far are durable already, so an error closing it changes nothing.
func (s *store) closeFile() {
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
}

// writeFirst writes the first state of a new store and makes the store's directory itself
// durable, in its parent.
func (s *store) writeFirst(st *storeState) error {
	if err := s.rewrite(st); err != nil {
		return err
	}
	parent := filepath.Dir(s.dir)
	if err := s.fs.SyncDir(parent); err != nil {
		s.failed = fmt.Errorf("fsync directory %s: %w", parent, err)
		return s.failed
	}
	return nil
}
