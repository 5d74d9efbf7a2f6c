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
	// tmpSuffix makes the name of an update in progress from the store's: store.tmp.
	tmpSuffix    = ".tmp"
	storeMagic   = "coordinatord-config"
	storeVersion = 1
	// maxHeaderLen bounds the header line; a longer first line is damage, not a header.
	maxHeaderLen = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// storeState is everything the config store keeps, as it is written and read back. Values are
// canonical text, as validated when they were set.
type storeState struct {
	NumPartitions int                          `json:"num_partitions"`
	Generation    uint64                       `json:"generation"`
	Broker        map[string]string            `json:"broker"`
	Groups        map[string]map[string]string `json:"groups"`
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

// encodeStore renders st in the store format: the header line, then the JSON body.
func encodeStore(st *storeState) ([]byte, error) {
	body, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode config store: %w", err)
	}
	body = append(body, '\n')
	header := fmt.Sprintf("%s %d %d %08x\n", storeMagic, storeVersion, len(body), crc32.Checksum(body, castagnoli))
	return append([]byte(header), body...), nil
}

// decodeStore parses and checks a store file read from path.
func decodeStore(path string, data []byte) (*storeState, error) {
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
	body := data[nl+1:]
	switch {
	case len(body) < length:
		return nil, damaged("truncated: the header announces %d bytes after it, the file has %d", length, len(body))
	case len(body) > length:
		return nil, damaged("%d unexpected bytes after the %d announced by the header", len(body)-length, length)
	}
	if got := crc32.Checksum(body, castagnoli); got != uint32(sum) {
		return nil, damaged("checksum mismatch: header says %08x, contents hash to %08x", sum, got)
	}
	// The version is judged only in a file whose length and checksum hold: a damaged digit of the
	// version must not pass for a newer release's store (whose advice is to keep the file).
	if version > storeVersion {
		return nil, &StoreError{Path: path, Newer: true,
			Reason: fmt.Sprintf("format version %d, but this release reads version %d", version, storeVersion)}
	}
	if version != storeVersion {
		return nil, damaged("format version %d, but this release reads version %d", version, storeVersion)
	}
	var st storeState
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, damaged("bad contents: %v", err)
	}
	if dec.More() {
		return nil, damaged("bad contents: more than one JSON value")
	}
	if st.NumPartitions < 1 {
		return nil, damaged("recorded share.coordinator.state.topic.num.partitions is %d", st.NumPartitions)
	}
	for group, overrides := range st.Groups {
		if group == "" {
			return nil, damaged("an override set for an empty group id")
		}
		if len(overrides) == 0 {
			delete(st.Groups, group)
		}
	}
	return &st, nil
}

// errStoreFailed marks a write refused because an earlier one left the store file uncertain.
var errStoreFailed = errors.New("config store failed")

// store keeps a storeState durable in one file, replaced atomically. It is used by one goroutine
// at a time (the Manager's admin lock).
type store struct {
	fs   vfs.FS
	path string // the store file
	dir  string // its directory
	tmp  string // the file an update is written to before it replaces path
	// failed is sticky: once an fsync or the replacement itself failed, what is on disk is
	// uncertain, so every later write is refused until a restart reloads the file.
	failed error
}

// openStore prepares the directory of the store file path and loads the file (nil state when
// there is none). A leftover temporary file is an update that never completed (and was never
// acknowledged): it is removed.
func openStore(fsys vfs.FS, path string) (*store, *storeState, error) {
	s := &store{fs: fsys, path: path, dir: filepath.Dir(path), tmp: path + tmpSuffix}
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
	st, err := decodeStore(path, data)
	if err != nil {
		return nil, nil, err
	}
	return s, st, nil
}

// write replaces the store file with st and returns once the new file is durable: it writes a
// temporary file, fsyncs it, renames it over the store file and fsyncs the directory. On error
// the store file holds the old state (or, if only the final directory fsync failed, possibly the
// new one), and st must not be treated as acknowledged.
func (s *store) write(st *storeState) error {
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
	if err := s.fs.SyncDir(s.dir); err != nil {
		s.failed = fmt.Errorf("fsync directory %s: %w", s.dir, err)
		return s.failed
	}
	return nil
}

// createTmp creates the temporary file of an update. One left by an update whose clean-up failed
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

// writeFirst writes the first state of a new store and makes the store's directory itself
// durable, in its parent.
func (s *store) writeFirst(st *storeState) error {
	if err := s.write(st); err != nil {
		return err
	}
	parent := filepath.Dir(s.dir)
	if err := s.fs.SyncDir(parent); err != nil {
		s.failed = fmt.Errorf("fsync directory %s: %w", parent, err)
		return s.failed
	}
	return nil
}
