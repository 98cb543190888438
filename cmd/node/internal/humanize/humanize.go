// Package humanize formats the figures the tools print.
package humanize

import "fmt"

// Bytes formats n as the tools print sizes: B, KiB, MiB, GiB, TiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}
