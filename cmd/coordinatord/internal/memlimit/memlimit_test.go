package memlimit

import (
	"testing"
	"testing/fstest"
)

func TestCgroup(t *testing.T) {
	const v2Mount = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
	const hybridMounts = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  int64
		ok    bool
	}{
		{"v2 limit on the process's cgroup", fstest.MapFS{
			"proc/self/cgroup":                          file("0::/kubepods/pod1/c1\n"),
			"proc/self/mountinfo":                       file(v2Mount),
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": file("1073741824\n"),
			"sys/fs/cgroup/kubepods/pod1/memory.max":    file("max\n"),
		}, 1 << 30, true},
		{"v2 limit on a parent only", fstest.MapFS{
			"proc/self/cgroup":                          file("0::/kubepods/pod1/c1\n"),
			"proc/self/mountinfo":                       file(v2Mount),
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": file("max\n"),
			"sys/fs/cgroup/kubepods/pod1/memory.max":    file("536870912\n"),
		}, 512 << 20, true},
		{"v2 inside a cgroup namespace: the process's cgroup is the mount's root", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"proc/self/mountinfo":      file("30 23 0:26 /../../pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
			"sys/fs/cgroup/memory.max": file("268435456\n"),
		}, 256 << 20, true},
		{"v2 without a limit", fstest.MapFS{
			"proc/self/cgroup":                    file("0::/user.slice\n"),
			"proc/self/mountinfo":                 file(v2Mount),
			"sys/fs/cgroup/user.slice/memory.max": file("max\n"),
		}, 0, false},
		{"hybrid: v1 memory controller with a limit", fstest.MapFS{
			"proc/self/cgroup":    file("4:memory:/docker/abc\n1:cpu:/\n0::/\n"),
			"proc/self/mountinfo": file(hybridMounts),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("2147483648\n"),
		}, 2 << 30, true},
		{"v1 cgroup directory not visible, no limit above it", fstest.MapFS{
			"proc/self/cgroup":                           file("4:memory:/process_api/a1\n0::/\n"),
			"proc/self/mountinfo":                        file(hybridMounts),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}, 0, false},
		{"no cgroup files", fstest.MapFS{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Cgroup(tc.files)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Cgroup = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/mnt/with\040space\134x`); got != `/mnt/with space\x` {
		t.Fatalf("unescape = %q", got)
	}
}
