//go:build !race

package transport

// raceEnabled reports whether the race detector is on: it multiplies memory,
// so memory bounds are asserted only without it.
const raceEnabled = false
