package groupcfg

import "os"

// fileSystem is the small part of a filesystem the config store uses. It is a seam so that tests
// can fail or "crash" at any step of an update.
type fileSystem interface {
	MkdirAll(path string) error
	ReadFile(name string) ([]byte, error)
	// Create creates or truncates name for writing.
	Create(name string) (file, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	// SyncDir makes the entries of directory dir (creations, renames, removals) durable.
	SyncDir(dir string) error
}

// file is an open file of a fileSystem.
type file interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
}

// osFS is the operating system's filesystem.
type osFS struct{}

func (osFS) MkdirAll(path string) error           { return os.MkdirAll(path, 0o755) }
func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

func (osFS) Create(name string) (file, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}
