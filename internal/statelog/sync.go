package statelog

import "fmt"

// Sync makes every append before it durable, for a log opened with Options.DeferSync (for any
// other log every append is durable already and Sync does nothing). A failed sync fails the
// log, as a failed append does: the kernel may have dropped the pages it could not write back,
// so no later sync can vouch for them.
func (l *Log) Sync() error {
	if err := l.usable(); err != nil {
		return err
	}
	if err := l.syncActive(); err != nil {
		return l.fail(err)
	}
	return nil
}

// syncActive syncs the active segment if it holds appends not yet synced (DeferSync, Journal),
// once a journaled log's tail is written out to it.
func (l *Log) syncActive() error {
	if err := l.flushTail(); err != nil {
		return err
	}
	if !l.dirty {
		return nil
	}
	path := l.segments[len(l.segments)-1].path
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("statelog: sync %s: %w", path, err)
	}
	l.dirty = false
	return nil
}
