package filters

// Fork returns a filter equal to f that shares f's arrays page by page: it
// copies the page tables and the small state (counters, shapes, the list of
// sub-filters), never a page. After it, neither filter owns a page any more;
// whichever writes a page first copies it, so each sees only its own writes
// and the other's arrays stay exactly as they were. Its cost is a few words per
// 4 KiB page of f, against a copy of every page for Clone.
//
// This is what makes snapshots cheap (fsm/DESIGN.md, "Copy-on-write
// snapshots"): the snapshot keeps f and streams it while later writes go to
// the fork, copying only the pages they touch. Like any method here, Fork is a
// write to f (it gives up f's pages): the caller serialises it with f's other
// writes. It reads no page, so it may run while other goroutines read f.
//
// The state of a load in progress (load.go) is shared, not copied: LoadChunk
// never changes one, it makes the next.
func Fork(f Filter) Filter { return f.fork() }

func (b *Bloom) fork() Filter    { return b.Fork() }
func (s *Scalable) fork() Filter { return s.Fork() }
func (c *Counting) fork() Filter { return c.Fork() }
func (f *DLeft) fork() Filter    { return f.Fork() }
func (c *Cuckoo) fork() Filter   { return c.Fork() }
