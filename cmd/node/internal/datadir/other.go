//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// lockDataDir takes no lock where flock is missing: the bolt file's own lock,
// waited on for a bounded time, is then the only guard.
func lockDataDir(dir string) (unlock func(), err error) { return func() {}, nil }
