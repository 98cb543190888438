//go:build rookery_mutants

package mutant

import (
	"fmt"
	"slices"
	"strings"
)

// Enabled says whether this binary can plant bugs.
const Enabled = true

var planted string

// Set plants the bug name ("" for none). Call it before the node starts.
func Set(name string) error {
	if name != "" && !slices.Contains(Names, name) {
		return fmt.Errorf("unknown mutant %q; the mutants are %s", name, strings.Join(Names, ", "))
	}
	planted = name
	return nil
}

// On reports whether the bug name is planted.
func On(name string) bool { return planted == name }
