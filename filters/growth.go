package filters

import "errors"

// Growth budgets. A filter that grows (scalable Bloom, RedisBloom's chain,
// both cuckoo layouts) adds a sub-filter when the newest one has no room,
// inside Add. The state machine decides how much memory a command may add
// (fsm: the room the replicas' --max-memory leaves, stamped into the command), and
// the filter must not allocate past it, on any replica: SetGrowthBudget gives
// the filter the bytes its growth may take while the command applies, and a
// growth that needs more is refused with ErrGrowthBudget before anything is
// allocated or changed, as RedisBloom refuses a sub-filter it cannot allocate.
// Each growth takes exactly the bytes the filter's MemoryBytes grows by, so
// the budget and the accounting never disagree. A budget is no part of the
// filter's state: it is not encoded, and ClearGrowthBudget ends it.

// ErrGrowthBudget reports an add that needed a new sub-filter larger than the
// growth budget left.
var ErrGrowthBudget = errors.New("filters: a new sub-filter would take more memory than the limit leaves")

// growable is embedded by the kinds that grow.
type growable struct {
	budget  uint64 // bytes growth may still take
	limited bool   // a budget is set
}

// SetGrowthBudget lets the filter's growth take at most left bytes until
// ClearGrowthBudget.
func (g *growable) SetGrowthBudget(left uint64) { g.budget, g.limited = left, true }

// ClearGrowthBudget lifts the budget.
func (g *growable) ClearGrowthBudget() { g.budget, g.limited = 0, false }

// take spends n bytes of the budget, or reports that it cannot.
func (g *growable) take(n uint64) bool {
	if !g.limited {
		return true
	}
	if n > g.budget {
		return false
	}
	g.budget -= n
	return true
}

// Budgeted is a filter that grows and takes a growth budget.
type Budgeted interface {
	SetGrowthBudget(left uint64)
	ClearGrowthBudget()
}

var (
	_ Budgeted = (*Scalable)(nil)
	_ Budgeted = (*RBChain)(nil)
	_ Budgeted = (*Cuckoo)(nil)
	_ Budgeted = (*RBCuckoo)(nil)
)
