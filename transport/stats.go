package transport

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// The counters behind INFO stats and INFO commandstats. They are kept where
// commands execute, with atomic adds and no lock: each command adds to its own
// table entry (no map lookup), and a connection adds its network bytes once per
// batch. Prometheus keeps its own, never-reset series; CONFIG RESETSTAT zeroes
// only these, as it does in Redis.

// cmdStat is one command's (or subcommand's) counters, as Redis keeps them:
// calls and usec count executed commands, failed those that replied with an
// error, rejected those refused before they ran (arity, authentication).
type cmdStat struct {
	calls, usec, failed, rejected atomic.Uint64
}

func (st *cmdStat) reset() {
	st.calls.Store(0)
	st.usec.Store(0)
	st.failed.Store(0)
	st.rejected.Store(0)
}

// serverStats are the server-wide counters of INFO stats.
type serverStats struct {
	connections atomic.Uint64 // accepted
	rejected    atomic.Uint64 // refused: every slot held (max clients)
	netIn       atomic.Uint64 // bytes read from clients
	netOut      atomic.Uint64 // bytes written to clients
	errors      atomic.Uint64 // error replies
	hits        atomic.Uint64 // reads of a key that exists
	misses      atomic.Uint64 // reads of a key that does not
	peakMemory  atomic.Uint64 // the highest filter memory seen (used_memory_peak)

	// The last samples of the totals, for the instantaneous rates.
	mu      sync.Mutex
	samples [statSamples]statSample
	next    int
}

// statSamples is how many samples the instantaneous rates average over, taken
// every statInterval: 1.6 s, as Redis's 16 samples of its 100 ms cron.
const (
	statSamples  = 16
	statInterval = 100 * time.Millisecond
)

type statSample struct {
	at                time.Time
	cmds, netIn, netO uint64
}

func (ss *serverStats) reset() {
	for _, c := range []*atomic.Uint64{&ss.connections, &ss.rejected, &ss.netIn, &ss.netOut,
		&ss.errors, &ss.hits, &ss.misses, &ss.peakMemory} {
		c.Store(0)
	}
	ss.mu.Lock()
	ss.samples = [statSamples]statSample{}
	ss.mu.Unlock()
}

// observe records one served command: the Prometheus series of (name,
// outcome), and the command's INFO counters. A rejected command (refused
// before it ran) counts as rejected only; an executed one adds its time, and
// counts as failed if it replied with an error. The time is from the moment
// the request was read to its reply, the same as
// rookery_command_duration_seconds.
func (s *Server) observe(name string, def *command, outcome string, start time.Time, rejected bool) {
	d := time.Since(start)
	s.m.series(name, outcome).observeDuration(d)
	if outcome != "ok" {
		s.stats.errors.Add(1)
	}
	if def == nil {
		return
	}
	st := &def.stat
	if rejected {
		st.rejected.Add(1)
		return
	}
	st.calls.Add(1)
	st.usec.Add(uint64(d.Microseconds()))
	if outcome != "ok" {
		st.failed.Add(1)
	}
}

// eachStat calls fn for every command and subcommand with its counters, in
// name order ("client|list" after "client").
func (s *Server) eachStat(fn func(name string, st *cmdStat)) {
	for _, cmd := range s.sortedCommands() {
		fn(cmd.name, &cmd.stat)
		for _, sub := range cmd.sortedSubs() {
			fn(sub.name, &sub.stat)
		}
	}
}

// totalCalls is total_commands_processed: every executed command.
func (s *Server) totalCalls() uint64 {
	var n uint64
	for _, cmd := range s.cmdList {
		n += cmd.stat.calls.Load()
		for _, sub := range cmd.subs {
			n += sub.stat.calls.Load()
		}
	}
	return n
}

// resetStats is CONFIG RESETSTAT: every INFO counter back to zero.
func (s *Server) resetStats() {
	s.eachStat(func(_ string, st *cmdStat) { st.reset() })
	s.stats.reset()
}

// sampleLoop samples the totals every statInterval until the server closes,
// for instantaneous_ops_per_sec and the instantaneous kbps.
func (s *Server) sampleLoop() {
	defer s.bg.Done()
	t := time.NewTicker(statInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			s.sample(now)
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Server) sample(now time.Time) {
	ss := &s.stats
	smp := statSample{at: now, cmds: s.totalCalls(), netIn: ss.netIn.Load(), netO: ss.netOut.Load()}
	s.notePeakMemory()
	ss.mu.Lock()
	ss.samples[ss.next%statSamples] = smp
	ss.next++
	ss.mu.Unlock()
}

// rates are the average rates over the samples kept: commands per second and
// input and output bytes per second.
func (ss *serverStats) rates() (ops, in, out float64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := min(ss.next, statSamples)
	if n < 2 {
		return 0, 0, 0
	}
	newest := ss.samples[(ss.next-1)%statSamples]
	oldest := ss.samples[(ss.next-n)%statSamples]
	secs := newest.at.Sub(oldest.at).Seconds()
	if secs <= 0 || newest.cmds < oldest.cmds || newest.netIn < oldest.netIn || newest.netO < oldest.netO {
		return 0, 0, 0 // a reset in between
	}
	return float64(newest.cmds-oldest.cmds) / secs, float64(newest.netIn-oldest.netIn) / secs,
		float64(newest.netO-oldest.netO) / secs
}

// notePeakMemory raises the peak to the filter memory now, and returns that.
func (s *Server) notePeakMemory() uint64 {
	if s.be == nil {
		return 0
	}
	used := s.be.Memory().Used
	for {
		p := s.stats.peakMemory.Load()
		if used <= p || s.stats.peakMemory.CompareAndSwap(p, used) {
			return used
		}
	}
}

// countingQueries counts INFO's keyspace_hits and keyspace_misses for the
// reads of filter keys it serves: a read of a key that exists is a hit, of
// one that does not a miss, whatever the filter answers. EXISTS and COUNT of
// an item cannot tell a missing key from a missing item by their answer, so
// they look the key up first (a map lookup under the registry's read lock).
type countingQueries struct {
	queries
	ss *serverStats
}

func (q *countingQueries) note(found bool) {
	if found {
		q.ss.hits.Add(1)
	} else {
		q.ss.misses.Add(1)
	}
}

func (q *countingQueries) noteErr(err error) { q.note(!errors.Is(err, fsm.ErrNotFound)) }

func (q *countingQueries) Exists(fam fsm.Family, key string, items [][]byte) []bool {
	_, ok := q.queries.KindOf(key)
	q.note(ok)
	return q.queries.Exists(fam, key, items)
}

func (q *countingQueries) Count(fam fsm.Family, key string, item []byte) uint64 {
	_, ok := q.queries.KindOf(key)
	q.note(ok)
	return q.queries.Count(fam, key, item)
}

func (q *countingQueries) Card(key string) (uint64, error) {
	_, ok := q.queries.KindOf(key)
	q.note(ok)
	return q.queries.Card(key)
}

func (q *countingQueries) Info(fam fsm.Family, key string) (fsm.Info, error) {
	in, err := q.queries.Info(fam, key)
	q.noteErr(err)
	return in, err
}

func (q *countingQueries) ScanDump(fam fsm.Family, key string, iter int64) (int64, []byte, error) {
	next, data, err := q.queries.ScanDump(fam, key, iter)
	q.noteErr(err)
	return next, data, err
}

func (q *countingQueries) KindOf(key string) (filters.Kind, bool) {
	k, ok := q.queries.KindOf(key)
	q.note(ok)
	return k, ok
}
