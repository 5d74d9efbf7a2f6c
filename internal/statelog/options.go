package statelog

import (
	"fmt"

	"github.com/coordinatord/coordinatord/internal/statelog/vfs"
)

// DefaultSegmentBytes is the default segment size (Kafka's
// share.coordinator.state.topic.segment.bytes default).
const DefaultSegmentBytes int64 = 100 << 20

// DefaultMaxRecordBytes is the default bound on one record.
const DefaultMaxRecordBytes = 8 << 20

// DefaultReadBufferBytes is the default replay read buffer.
const DefaultReadBufferBytes = 1 << 20

// minReadBufferBytes keeps tiny configured buffers workable; frames larger than the buffer
// grow it anyway.
const minReadBufferBytes = 64

// FS is the filesystem seam of the log; see package vfs. Tests substitute the filesystems of
// package faultfs to inject errors and simulate power cuts.
type FS = vfs.FS

// File is an open file of an FS.
type File = vfs.File

// Options configures a Log. Zero values mean the defaults.
type Options struct {
	SegmentBytes    int64    // roll when the active segment would exceed this
	MaxRecordBytes  int      // bound on one record, checked on append and before allocating on read
	ReadBufferBytes int      // replay read buffer (soft; maps to share.coordinator.load.buffer.size)
	FS              FS       // nil → the operating system's filesystem
	Metrics         *Metrics // nil → nothing recorded
	Name            string   // value of the `partition` label on per-log metrics, e.g. "7"
}

// resolve fills in defaults and rejects values the log cannot honour.
func (o Options) resolve() (Options, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.ReadBufferBytes == 0 {
		o.ReadBufferBytes = DefaultReadBufferBytes
	}
	switch {
	case o.SegmentBytes < 0:
		return o, fmt.Errorf("statelog: SegmentBytes %d is negative", o.SegmentBytes)
	case o.MaxRecordBytes < 0 || o.MaxRecordBytes > MaxBatchBytes-recordPrefixSize:
		return o, fmt.Errorf("statelog: MaxRecordBytes %d outside [1, %d]", o.MaxRecordBytes, MaxBatchBytes-recordPrefixSize)
	case o.ReadBufferBytes < 0:
		return o, fmt.Errorf("statelog: ReadBufferBytes %d is negative", o.ReadBufferBytes)
	}
	o.ReadBufferBytes = max(o.ReadBufferBytes, minReadBufferBytes)
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	return o, nil
}
