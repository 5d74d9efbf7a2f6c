package faultfs_test

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/coordinatord/coordinatord/internal/vfs"
	"github.com/coordinatord/coordinatord/internal/vfs/faultfs"
)

// workload stands for the code under test: it writes a file durably.
func workload(fsys vfs.FS) error {
	f, err := fsys.Create("/data")
	if err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte("payload"), 0); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.SyncDir("/")
}

// Fail every operation of a workload in turn, until it runs through.
func ExampleOnIndex() {
	for i := int64(0); ; i++ {
		mem := faultfs.NewCrashFS()
		inj := faultfs.OnIndex(i, syscall.EIO)
		err := workload(faultfs.Wrap(mem, inj))
		op, fired := inj.Fired()
		if !fired {
			fmt.Printf("completed after %d operations: %v\n", i, err)
			return
		}
		fmt.Printf("failed %s: error surfaced: %v\n", op.Kind, errors.Is(err, syscall.EIO))
	}
	// Output:
	// failed create: error surfaced: true
	// failed write: error surfaced: true
	// failed sync: error surfaced: true
	// failed close: error surfaced: true
	// failed sync-dir: error surfaced: true
	// completed after 5 operations: <nil>
}

// Fail every fsync of segment files with EIO, then switch the fault off.
func ExampleMatch() {
	f := faultfs.Wrap(faultfs.NewCrashFS(), nil)
	f.SetInjector(faultfs.Match(faultfs.OnKinds(faultfs.OpSync).And(faultfs.OnPath("*.seg")), syscall.EIO))
	file, _ := f.Create("/0.seg")
	fmt.Println(errors.Is(file.Sync(), syscall.EIO))
	f.SetInjector(nil)
	fmt.Println(file.Sync())
	// Output:
	// true
	// <nil>
}

// What survives a power cut: only what was synced, file data and directory entries alike.
func ExampleCrashFS_CrashClone() {
	c := faultfs.NewCrashFS()
	f, _ := c.Create("/synced")
	_, _ = f.WriteAt([]byte("kept"), 0)
	_ = f.Sync()
	_ = c.SyncDir("/")
	_, _ = f.WriteAt([]byte(" and lost"), 4)
	g, _ := c.Create("/never-synced-entry")
	_ = g.Sync()

	after := c.CrashClone(faultfs.CrashOptions{})
	names, _ := after.ReadDir("/")
	data, _ := after.ReadFile("/synced")
	fmt.Println(names, string(data))
	// Output:
	// [synced] kept
}
