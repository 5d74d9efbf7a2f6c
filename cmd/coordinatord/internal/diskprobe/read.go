package diskprobe

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// ReadResult is the outcome of ReadBandwidth.
type ReadResult struct {
	Files int
	Bytes int64
	Took  time.Duration
}

// ReadBandwidth reads every file in paths from start to end, one after the other, through one
// buffer of bufBytes, and reports the bytes read and the time it took. It does not drop the page
// cache: call DropCaches first to measure the disk rather than memory.
func ReadBandwidth(paths []string, bufBytes int) (ReadResult, error) {
	if bufBytes <= 0 {
		return ReadResult{}, fmt.Errorf("read probe: want a buffer > 0 bytes, got %d", bufBytes)
	}
	buf := make([]byte, bufBytes)
	res := ReadResult{Files: len(paths)}
	began := time.Now()
	for _, p := range paths {
		n, err := readAll(p, buf)
		res.Bytes += n
		if err != nil {
			return res, err
		}
	}
	res.Took = time.Since(began)
	return res, nil
}

func readAll(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read probe: %w", err)
	}
	defer f.Close()
	var total int64
	for {
		n, err := f.Read(buf)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("read probe: read %s: %w", path, err)
		}
	}
}
