package cluster

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// allocate reserves n bytes of blocks for f without writing them.
func allocate(f *os.File, n int64) error {
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err == nil {
		return nil
	}
	return writeZeros(f, n) // a file system without fallocate
}

// startWriteback asks the kernel to start writing a file range to disk now,
// without waiting for it.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
