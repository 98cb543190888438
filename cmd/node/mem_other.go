//go:build !linux

package main

// totalMemory is the machine's physical memory in bytes; 0 where unknown, and
// --max-memory auto then takes 4 GiB.
func totalMemory() uint64 { return 0 }
