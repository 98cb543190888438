//go:build unix

package transport

import (
	"fmt"
	"syscall"
)

// infoCPU: the process's CPU time, as getrusage gives it. A node forks no
// children.
func infoCPU(s *Server, b *infoBuf) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return
	}
	tv := func(t syscall.Timeval) string { return fmt.Sprintf("%d.%06d", t.Sec, t.Usec) }
	b.field("used_cpu_sys", tv(ru.Stime))
	b.field("used_cpu_user", tv(ru.Utime))
	b.field("used_cpu_sys_children", "0.000000")
	b.field("used_cpu_user_children", "0.000000")
}
