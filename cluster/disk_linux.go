package cluster

import (
	"os"
	"syscall"
)

// allocate reserves n bytes of blocks for f without writing them.
func allocate(f *os.File, n int64) error {
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err == nil {
		return nil
	}
	return writeZeros(f, n) // a file system without fallocate
}
