package statelog

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Segment file names are "<base offset, 20 decimal digits>-<segment id, 16 hex digits>.seg",
// so that lexical order is offset order.
const (
	baseDigits  = 20
	idDigits    = 16
	segNameSize = baseDigits + 1 + idDigits + len(segmentSuffix)
)

// isLogFile reports whether the file name (without its directory) is one a state log keeps:
// a segment file, the log-start offset file or the clean-end file. A directory holding none has
// no log.
func isLogFile(name string) bool {
	return IsSegmentFile(name) || name == startFileName || name == cleanFileName
}

// holdsLog reports whether the directory listing names includes a file of a state log, or a
// misnamed segment file (*.seg): recovery then has something to say about the directory, if only
// that it is damaged.
func holdsLog(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool {
		return isLogFile(n) || strings.HasSuffix(n, segmentSuffix)
	})
}

func segmentName(base int64, id uint64) string {
	return fmt.Sprintf("%0*d-%0*x%s", baseDigits, base, idDigits, id, segmentSuffix)
}

// parseSegmentName returns the base offset and id a segment name encodes. Only the exact
// form segmentName produces is accepted.
func parseSegmentName(name string) (base int64, id uint64, ok bool) {
	if len(name) != segNameSize || !strings.HasSuffix(name, segmentSuffix) || name[baseDigits] != '-' {
		return 0, 0, false
	}
	b, err := strconv.ParseUint(name[:baseDigits], 10, 64)
	if err != nil || b > maxOffset {
		return 0, 0, false
	}
	i, err := strconv.ParseUint(name[baseDigits+1:baseDigits+1+idDigits], 16, 64)
	if err != nil || segmentName(int64(b), i) != name {
		return 0, 0, false
	}
	return int64(b), i, true
}

// IsSegmentFile reports whether name (a file name, without directory) is that of a segment of a
// log, for code that reads a log's files directly (package datadir lists them for backups and
// read-bandwidth probes).
func IsSegmentFile(name string) bool {
	_, _, ok := parseSegmentName(name)
	return ok
}
