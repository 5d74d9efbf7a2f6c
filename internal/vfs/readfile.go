package vfs

import "io"

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
