//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Lock takes the data directory's lock file for this process, or says
// which process holds it; it never waits for it. The lock lasts until unlock
// or the process's end.
func Lock(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	for tries := 0; ; tries++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock data dir %s: %w", path, err)
		}
		// The holder writes its pid just after it takes the lock: give it a
		// moment to.
		pid := readPid(path)
		if pid > 0 || tries >= 20 {
			f.Close()
			return nil, errInUse(dir, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
