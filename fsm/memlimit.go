package fsm

import (
	"errors"

	"github.com/rookerydb/rookery/filters"
)

// The memory limit in the log. A command that may create or grow a filter
// carries the leader's view of the least room the replicas' --max-memory leaves the group
// (Command.MemLimit, log format 6). Admission on the leader refuses, before
// proposing, what it can foresee; this is the backstop, the same on every
// replica because it reads only the log and the state: a filter is created
// only if the bytes it is counted as fit under the limit, checked from its
// spec or header before anything is built and from the built filter before it
// is installed, and a filter grows during the command only by sub-filters that
// fit in what the limit leaves (filters.Budgeted). Counted bytes
// (MemoryBytes) are what a filter may ever allocate: pages are allocated as
// they are written (filters/paged.go).

// roomFor reports whether c may add need bytes to the filters' memory.
func (f *FSM) roomFor(c *Command, need uint64) error {
	if c.MemLimit == 0 {
		return nil
	}
	if used := f.memory.Load(); used > c.MemLimit || need > c.MemLimit-used {
		return ErrOutOfMemory
	}
	return nil
}

// createWithin builds the filter c creates (build) for key, within c's
// memory limit: estimate is its counted bytes, known before it is built (0
// when unknown: the build's own refusal comes first), and the built filter's
// exact count is checked again before the caller installs it.
func (f *FSM) createWithin(c *Command, estimate uint64, build func() (filters.Filter, error)) (filters.Filter, error) {
	if estimate != 0 {
		if err := f.roomFor(c, estimate+KeyBytes(c.Key)); err != nil {
			return nil, err
		}
	}
	flt, err := build()
	if err != nil {
		return nil, err
	}
	if err := f.roomFor(c, entryBytes(c.Key, flt)); err != nil {
		return nil, err
	}
	return flt, nil
}

// budgetGrowth lets flt grow during c by at most what c's memory limit leaves,
// and returns the filter whose budget the caller ends (ClearGrowthBudget), or
// nil when there is none.
func (f *FSM) budgetGrowth(c *Command, flt filters.Filter) filters.Budgeted {
	b, ok := flt.(filters.Budgeted)
	if c.MemLimit == 0 || !ok {
		return nil
	}
	left := uint64(0)
	if used := f.memory.Load(); used < c.MemLimit {
		left = c.MemLimit - used
	}
	b.SetGrowthBudget(left)
	return b
}

// growthRefused reports whether an add failed for want of memory.
func growthRefused(err error) bool { return errors.Is(err, filters.ErrGrowthBudget) }
