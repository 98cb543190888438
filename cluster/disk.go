package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// A full disk. raft steps down when its log store fails to append, and a
// leader re-elected on the same full disk fails again at once: the term used
// to climb every half second and writes answered "no leader". Worse, raft
// panics when it cannot save its term. So the node keeps a ballast file in the
// data directory (up to 64 MiB, reserved with fallocate). The first append
// that finds the disk full gives the ballast up and retries, so raft never
// sees the failure; from then on user writes are refused before they reach
// the log (ErrDiskFull, definitely not applied), while raft's own rare
// entries (a term's no-op, configuration changes) and its term and vote still
// fit. Reads go on. Once the volume has room for the ballast again, the node
// takes it back and writes resume by themselves. Free space below lowWater
// refuses writes before an append ever fails. Other I/O errors (EIO, a
// read-only remount) refuse writes too, until a probe write succeeds.

// Errors of the disk.
var (
	// ErrDiskFull: the node's disk has no room for more log; not applied.
	ErrDiskFull = errors.New("disk full")
	// ErrDiskError: the node's disk failed a write; not applied.
	ErrDiskError = errors.New("disk error")
)

const (
	ballastName = "ballast"
	ballastMax  = 64 << 20
	// ballastMin fits a retry of the largest batch the proposer makes.
	ballastMin = 2*maxBatchBytes + 1<<20
	// lowWater is the free space under which writes are refused before an
	// append fails: room for a full batch (maxBatchBytes) and its pages.
	lowWater = 2*maxBatchBytes + 4<<20
)

// disk watches the volume of a data directory.
type disk struct {
	dir     string
	log     *slog.Logger
	size    int64                            // the ballast's size
	free    func() (uint64, error)           // bytes available; statfs
	reserve func(path string, n int64) error // writes the ballast

	mu      sync.Mutex
	problem error // wraps ErrDiskFull or ErrDiskError; nil when writes may go
	ballast bool
	changed chan struct{} // closed and replaced when problem changes
}

func newDisk(dir string, log *slog.Logger) *disk {
	d := &disk{dir: dir, log: log, free: func() (uint64, error) { return freeBytes(dir) },
		reserve: reserveFile, changed: make(chan struct{})}
	free, err := d.free()
	if err != nil {
		free = 20 * ballastMax
	}
	d.size = min(ballastMax, max(ballastMin, int64(free/20)))
	os.Remove(filepath.Join(dir, ballastName)) // sized afresh for this volume
	d.check()
	return d
}

// refuse returns why writes are refused now, or nil.
func (d *disk) refuse() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.problem
}

// admit is refuse for a batch of about n bytes about to be proposed: it also
// looks at the free space now (one statfs, cheap beside the fsync the batch
// costs), so a disk filling fast is caught before an append fails.
func (d *disk) admit(n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.problem != nil {
		return d.problem
	}
	free, err := d.free()
	if err == nil && free < lowWater+uint64(n) {
		d.setProblem(fmt.Errorf("%w: %d bytes free in %s, %d needed to keep writing", ErrDiskFull, free, d.dir, lowWater+uint64(n)))
	}
	return d.problem
}

// changes is closed the next time the problem changes.
func (d *disk) changes() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

func (d *disk) setProblem(p error) {
	if (p == nil) == (d.problem == nil) && (p == nil || p.Error() == d.problem.Error()) {
		return
	}
	if p != nil {
		d.log.Error("refusing writes: the disk cannot take them", "dir", d.dir, "problem", p)
	} else {
		d.log.Info("the disk has room again; writes resume", "dir", d.dir)
	}
	d.problem = p
	close(d.changed)
	d.changed = make(chan struct{})
}

// failed is told of a log or stable store write that failed; it reports
// whether to try once more (the ballast was given up for it).
func (d *disk) failed(err error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		d.setProblem(fmt.Errorf("%w: %v", ErrDiskFull, err))
		if d.ballast {
			d.ballast = false
			if rerr := os.Remove(filepath.Join(d.dir, ballastName)); rerr == nil {
				return true
			}
		}
	case errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS):
		d.setProblem(fmt.Errorf("%w: %v", ErrDiskError, err))
	}
	return false
}

// check looks at the volume: it takes the ballast back and lifts a refusal
// when there is room, and refuses writes when room runs low.
func (d *disk) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, err := d.free()
	if err != nil {
		return // statfs unavailable: rely on failed appends alone
	}
	if errors.Is(d.problem, ErrDiskError) {
		if err := probeWrite(d.dir); err != nil {
			return
		}
		d.setProblem(nil)
	}
	if !d.ballast {
		if free < uint64(d.size)+lowWater {
			if d.problem == nil {
				d.setProblem(fmt.Errorf("%w: %d bytes free in %s, %d needed to keep writing", ErrDiskFull, free, d.dir, uint64(d.size)+lowWater))
			}
			return
		}
		if err := d.reserve(filepath.Join(d.dir, ballastName), d.size); err != nil {
			if d.problem == nil {
				d.setProblem(fmt.Errorf("%w: reserving the ballast: %v", ErrDiskFull, err))
			}
			return
		}
		d.ballast = true
		free, _ = d.free()
	}
	switch {
	case free < lowWater && d.problem == nil:
		d.setProblem(fmt.Errorf("%w: %d bytes free in %s, %d needed to keep writing", ErrDiskFull, free, d.dir, uint64(lowWater)))
	case free >= lowWater && errors.Is(d.problem, ErrDiskFull):
		d.setProblem(nil)
	}
}

// reserveFile writes a file of n bytes that holds its blocks.
func reserveFile(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// writeZeros is allocate where the system has no fallocate.
func writeZeros(f *os.File, n int64) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// probeWrite writes, syncs and removes a small file.
func probeWrite(dir string) error {
	path := filepath.Join(dir, ".probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, "probe")
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	os.Remove(path)
	return err
}

// diskLogs is a log store whose appends go through the disk's ballast.
type diskLogs struct {
	raft.LogStore
	d *disk
}

func (s diskLogs) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s diskLogs) StoreLogs(logs []*raft.Log) error {
	err := s.LogStore.StoreLogs(logs)
	if err != nil && s.d.failed(err) {
		if err = s.LogStore.StoreLogs(logs); err != nil {
			s.d.log.Error("an append failed even with the ballast given up", "err", err)
		}
	}
	return err
}

// diskStable is a stable store (term, vote) whose writes go through the
// ballast: raft panics when it cannot save its term.
type diskStable struct {
	raft.StableStore
	d *disk
}

func (s diskStable) Set(k, v []byte) error {
	err := s.StableStore.Set(k, v)
	if err != nil && s.d.failed(err) {
		err = s.StableStore.Set(k, v)
	}
	return err
}

func (s diskStable) SetUint64(k []byte, v uint64) error {
	err := s.StableStore.SetUint64(k, v)
	if err != nil && s.d.failed(err) {
		err = s.StableStore.SetUint64(k, v)
	}
	return err
}

// diskWatch checks the volume every second, gossips what it finds, and hands
// leadership to a voter whose disk has room while this one's has none.
func (n *Node) diskWatch() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	changed := n.disk.changes()
	for {
		select {
		case <-tick.C:
			n.disk.check()
		case <-changed:
			changed = n.disk.changes()
			if n.ml != nil {
				n.regossip()
			}
		case <-n.stop:
			return
		}
		if n.closing() {
			return
		}
		if n.disk.refuse() != nil {
			n.stepAsideFull()
		}
	}
}

// stepAsideFull hands over the leadership of every group this node leads to
// a voter whose disk takes log: a leader that cannot append takes no write.
func (n *Node) stepAsideFull() {
	for _, g := range n.openGroups() {
		if g.raft == nil || !g.IsLeader() || g.voters() <= 1 || g.writableVoters() <= 1 {
			continue
		}
		if err := g.await(g.raft.LeadershipTransfer()); err != nil {
			g.log.Warn("leader with a full disk could not hand leadership over", "err", err)
		}
	}
}

// writableVoters counts the voters whose disk takes log, this node included.
func (g *group) writableVoters() int {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	g.n.memMu.Lock()
	defer g.n.memMu.Unlock()
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		if string(s.ID) == g.n.cfg.ID {
			if g.n.disk.refuse() == nil {
				c++
			}
			continue
		}
		if m, ok := g.n.memTable[string(s.ID)]; !ok || m.Disk == "" {
			c++
		}
	}
	return c
}

// refuseWrites says why the leader cannot take a batch of about size bytes
// now: its own disk, or too few voters whose disk takes log to make a quorum.
func (g *group) refuseWrites(size int) error {
	if err := g.n.disk.admit(size); err != nil {
		return err
	}
	if v := g.voters(); v > 1 && g.writableVoters() < v/2+1 {
		return fmt.Errorf("%w: only %d of %d voters have room for the log", ErrDiskFull, g.writableVoters(), v)
	}
	return nil
}
