//go:build !rookery_mutants

package mutant

import "errors"

// Enabled says whether this binary can plant bugs.
const Enabled = false

// Set plants nothing: this binary has no bugs to plant.
func Set(name string) error {
	if name == "" {
		return nil
	}
	return errors.New("this binary is not built with -tags rookery_mutants")
}

// On reports whether the bug name is planted: never, in this binary.
func On(string) bool { return false }
