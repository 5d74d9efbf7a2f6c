package faultfs

import "fmt"

// OpKind names a filesystem operation of the vfs seam.
type OpKind int

// The operations an Injector is consulted about. File operations carry the path the file was
// opened with; OpClose covers closing files, releasing locks and closing syncers. Syncer
// operations carry the directory the syncer was opened on (OpSyncFS) or asked about (OpStat).
const (
	OpCreate OpKind = iota
	OpOpen
	OpOpenReadWrite
	OpRemove
	OpRename
	OpReadDir
	OpMkdirAll
	OpSyncDir
	OpLock
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpSize
	OpClose
	OpOpenSyncer
	OpSyncFS
	OpStat
)

var opNames = [...]string{
	OpCreate:        "create",
	OpOpen:          "open",
	OpOpenReadWrite: "open-read-write",
	OpRemove:        "remove",
	OpRename:        "rename",
	OpReadDir:       "read-dir",
	OpMkdirAll:      "mkdir-all",
	OpSyncDir:       "sync-dir",
	OpLock:          "lock",
	OpRead:          "read",
	OpWrite:         "write",
	OpSync:          "sync",
	OpTruncate:      "truncate",
	OpSize:          "size",
	OpClose:         "close",
	OpOpenSyncer:    "open-syncer",
	OpSyncFS:        "syncfs",
	OpStat:          "stat",
}

// String returns the operation's name, e.g. "sync".
func (k OpKind) String() string {
	if k >= 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", int(k))
}

// Op is one filesystem operation: its kind and the path it acts on (for a rename, the source).
type Op struct {
	Kind OpKind
	Path string
}

// String returns "kind path".
func (o Op) String() string { return o.Kind.String() + " " + o.Path }
