package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
)

// ReadFile returns the whole content of the file name of fsys, as os.ReadFile does on the
// operating system's: it opens the file, asks its size, reads that many bytes and closes it, so
// each step is one operation of the seam (and one failure point for fault injection). A file
// that shrinks meanwhile is returned as far as it reaches; bytes appended after the size was
// taken are not read. The error is the first failing operation's; for a missing file it
// satisfies errors.Is(err, fs.ErrNotExist).
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	data, err := readAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

// FileSize returns the size of the file name of fsys (open, size, close, as ReadFile does). For
// a missing file the error satisfies errors.Is(err, fs.ErrNotExist).
func FileSize(fsys FS, name string) (int64, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return 0, err
	}
	size, err := f.Size()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return size, err
}

// readAll reads f from its start to the size it has now.
func readAll(f File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err == io.EOF {
		err = nil
	}
	return data[:n], err
}

// ReplaceFile atomically replaces the file name in dir with one holding content: it writes the
// file tmpName in dir (replacing one a failed attempt left), syncs it, renames it over name and
// syncs dir. A crash at any point leaves the old file or the new one; tmpName may be left, and
// the next ReplaceFile replaces it.
func ReplaceFile(fsys FS, dir, tmpName, name string, content []byte) error {
	tmp, path := filepath.Join(dir, tmpName), filepath.Join(dir, name)
	f, err := fsys.Create(tmp)
	if errors.Is(err, fs.ErrExist) {
		if err = fsys.Remove(tmp); err == nil {
			f, err = fsys.Create(tmp)
		}
	}
	if err != nil {
		return withPath("create", tmp, err)
	}
	if _, err = f.WriteAt(content, 0); err != nil {
		err = withPath("write", tmp, err)
	} else if err = f.Sync(); err != nil {
		err = withPath("sync", tmp, err)
	}
	if cerr := f.Close(); cerr != nil {
		err = errors.Join(err, withPath("close", tmp, cerr))
	}
	if err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return withPath("sync directory", dir, err)
	}
	return nil
}

// withPath is err as "op path: cause", unless err already names path (an *fs.PathError of the
// operating system's file system does).
func withPath(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return err
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}
