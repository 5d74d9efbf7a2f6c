package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// The replica's record of what its log holds lives next to the log, in two files:
//
//	applied      28 bytes: magic "CDRA" uint32 | version uint16 | flags uint16 (zero) |
//	             applied Raft index uint64 | end offset int64 | crc32c uint32 over bytes 0..24
//	recovering   empty: present while the log is being replaced by a snapshot from another replica
//
// applied says that the log holds, durably, the records of every Raft entry up to the applied
// index, and ends at the end offset: a replica reopens its log truncated there and has the
// entries after it applied again. These names and layouts are part of the format.
const (
	appliedFileName    = "applied"
	appliedTmpName     = "applied.tmp"
	recoveringFileName = "recovering"
	appliedMagic       = 0x41524443 // "CDRA"
	appliedVersion     = 1
	appliedFileSize    = 28
)

// OwnerFiles are the files a replica keeps in its state partition's log directory, for
// statelog.Options.OwnerFiles.
var OwnerFiles = []string{appliedFileName, appliedTmpName, recoveringFileName}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appliedState is the content of the applied file.
type appliedState struct {
	index uint64
	end   int64
}

// readApplied reads dir's applied file; ok is false when there is none.
func readApplied(fsys statelog.FS, dir string) (st appliedState, ok bool, err error) {
	path := filepath.Join(dir, appliedFileName)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return appliedState{}, false, nil
	}
	if err != nil {
		return appliedState{}, false, fmt.Errorf("raftlog: open %s: %w", path, err)
	}
	defer f.Close()
	var b [appliedFileSize + 1]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return appliedState{}, false, fmt.Errorf("raftlog: read %s: %w", path, err)
	}
	switch {
	case n != appliedFileSize:
		return appliedState{}, false, fmt.Errorf("raftlog: %s has %d bytes, want %d: damaged", path, n, appliedFileSize)
	case binary.LittleEndian.Uint32(b[0:]) != appliedMagic || binary.LittleEndian.Uint32(b[24:]) != crc32.Checksum(b[:24], castagnoli):
		return appliedState{}, false, fmt.Errorf("raftlog: %s is damaged (bad magic or checksum)", path)
	case binary.LittleEndian.Uint16(b[4:]) != appliedVersion || binary.LittleEndian.Uint16(b[6:]) != 0:
		return appliedState{}, false, fmt.Errorf("raftlog: %s has format version %d, flags %#x: written by a newer coordinatord",
			path, binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]))
	}
	st = appliedState{index: binary.LittleEndian.Uint64(b[8:]), end: int64(binary.LittleEndian.Uint64(b[16:]))}
	if st.end < 0 {
		return appliedState{}, false, fmt.Errorf("raftlog: %s names the end offset %d", path, st.end)
	}
	return st, true, nil
}

// writeApplied atomically replaces dir's applied file with st: write a temporary file, sync it,
// rename it over, sync the directory.
func writeApplied(fsys statelog.FS, dir string, st appliedState) error {
	var b [appliedFileSize]byte
	binary.LittleEndian.PutUint32(b[0:], appliedMagic)
	binary.LittleEndian.PutUint16(b[4:], appliedVersion)
	binary.LittleEndian.PutUint64(b[8:], st.index)
	binary.LittleEndian.PutUint64(b[16:], uint64(st.end))
	binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(b[:24], castagnoli))
	if err := vfs.ReplaceFile(fsys, dir, appliedTmpName, appliedFileName, b[:]); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return nil
}

// setMarker creates (on) or removes the empty file name in dir, durably.
func setMarker(fsys statelog.FS, dir, name string, on bool) error {
	path := filepath.Join(dir, name)
	if on {
		f, err := fsys.Create(path)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("raftlog: create %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("raftlog: close %s: %w", path, err)
		}
	} else if err := fsys.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("raftlog: remove %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("raftlog: sync directory %s: %w", dir, err)
	}
	return nil
}

// hasFile reports whether dir/name exists.
func hasFile(fsys statelog.FS, dir, name string) (bool, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("raftlog: list %s: %w", dir, err)
	}
	for _, n := range names {
		if n == name {
			return true, nil
		}
	}
	return false, nil
}
