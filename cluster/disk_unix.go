//go:build linux || darwin || freebsd

package cluster

import "syscall"

// freeBytes is the space available to this process on dir's volume.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
