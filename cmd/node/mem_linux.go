package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// totalMemory is the memory this process may use in bytes, 0 if unknown: the
// machine's physical memory, or the container's limit (cgroup v2 memory.max,
// v1 memory.limit_in_bytes) when that is lower, so that --max-memory auto in a
// container is half of the container, not of the host.
func totalMemory() uint64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	total := uint64(si.Totalram) * uint64(si.Unit)
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if lim, ok := cgroupLimit(f); ok && lim < total {
			total = lim
		}
	}
	return total
}

// cgroupLimit reads a cgroup memory limit file ("max" or a huge number: none).
func cgroupLimit(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil && v > 0
}
