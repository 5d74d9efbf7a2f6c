package memlimit

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// unlimitedV1 is the value from which cgroup v1 means "no limit": the kernel reports its largest
// page-aligned value (9223372036854771712 on 4 KiB pages), never a real limit.
const unlimitedV1 = 1 << 62

// Cgroup returns the memory limit in bytes of the process's cgroup, read from fsys (the root of
// the file system: os.DirFS("/")), and false when it has none (no cgroup, or no limit set).
func Cgroup(fsys fs.FS) (int64, bool) {
	cgroups, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	mounts, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		return 0, false
	}
	v2Path, v1Path := cgroupPaths(cgroups)
	v2Mount, v1Mount := cgroupMounts(mounts)
	if v2Path != "" && v2Mount.point != "" {
		if limit, ok := lowest(fsys, v2Mount.dir(v2Path), v2Mount.point, "memory.max"); ok {
			return limit, true
		}
	}
	if v1Path != "" && v1Mount.point != "" {
		return lowest(fsys, v1Mount.dir(v1Path), v1Mount.point, "memory.limit_in_bytes")
	}
	return 0, false
}

// cgroupPaths returns the process's cgroup v2 path (the "0::PATH" line) and the path of its v1
// memory controller ("N:...memory...:PATH") from /proc/self/cgroup.
func cgroupPaths(data []byte) (v2, v1 string) {
	for line := range strings.Lines(string(data)) {
		fields := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(fields) != 3 {
			continue
		}
		switch {
		case fields[0] == "0" && fields[1] == "":
			v2 = fields[2]
		case hasItem(fields[1], "memory"):
			v1 = fields[2]
		}
	}
	return v2, v1
}

// mount is where a cgroup hierarchy is mounted: its root within the hierarchy and its mount point.
type mount struct {
	root, point string
}

// dir is the directory of the cgroup at path within the hierarchy. A path outside the mount's
// root (a cgroup namespace the mount does not reflect) is taken as the mount point itself, which
// is then the process's own cgroup.
func (m mount) dir(cgroupPath string) string {
	rel, ok := strings.CutPrefix(cgroupPath, m.root)
	if !ok || m.root != "/" && rel != "" && rel[0] != '/' {
		return m.point
	}
	return path.Join(m.point, rel)
}

// cgroupMounts finds the cgroup v2 mount and the v1 mount of the memory controller in
// /proc/self/mountinfo ("ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER").
func cgroupMounts(data []byte) (v2, v1 mount) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		before, after, found := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(before), strings.Fields(after)
		if !found || len(fields) < 5 || len(tail) < 1 {
			continue
		}
		m := mount{root: unescape(fields[3]), point: unescape(fields[4])}
		switch {
		case tail[0] == "cgroup2" && v2.point == "":
			v2 = m
		case tail[0] == "cgroup" && len(tail) >= 3 && hasItem(tail[2], "memory") && v1.point == "":
			v1 = m
		}
	}
	return v2, v1
}

// lowest reads file in dir and in each of its parents up to top and returns the lowest limit
// set, if any is.
func lowest(fsys fs.FS, dir, top, file string) (int64, bool) {
	var limit int64
	found := false
	for {
		if n, ok := readLimit(fsys, path.Join(dir, file)); ok && (!found || n < limit) {
			limit, found = n, true
		}
		if dir == top || dir == "/" || dir == "." || !strings.HasPrefix(dir, top) {
			return limit, found
		}
		dir = path.Dir(dir)
	}
}

// readLimit reads a limit file: a byte count, or "max" (v2) or a huge value (v1) for none.
func readLimit(fsys fs.FS, name string) (int64, bool) {
	data, err := fs.ReadFile(fsys, strings.TrimPrefix(name, "/"))
	if err != nil {
		return 0, false
	}
	text := strings.TrimSpace(string(data))
	if text == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n <= 0 || n >= unlimitedV1 {
		return 0, false
	}
	return n, true
}

// hasItem reports whether the comma-separated list holds item.
func hasItem(list, item string) bool {
	for it := range strings.SplitSeq(list, ",") {
		if it == item {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes of spaces, tabs, newlines and backslashes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
