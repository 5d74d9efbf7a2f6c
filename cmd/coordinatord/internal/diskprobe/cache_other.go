//go:build !linux

package diskprobe

import "errors"

// DropCaches is only implemented on Linux.
func DropCaches() error {
	return errors.New("dropping the page cache is only supported on Linux")
}
