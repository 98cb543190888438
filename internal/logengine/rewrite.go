package logengine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Rewrite replaces the engine's database with a copy of the groups keep,
// less group gid's entries from index from on (from 0: everything of group
// gid, its stable store too). The caller names the groups to keep (a node
// knows them from its directories) rather than have them listed, because a
// listing reads blocks that may be the damaged ones. Recovery tools use it, with the node stopped, to cut
// damaged entries: deleting them in place would leave the damaged block in
// its file, where a compaction would read it, fail, and try again for ever.
//
// Every other entry is copied as stored; one that cannot be read (another
// damaged block) is copied as a damaged entry, so that its group reports it
// at its index. A group whose bounds cannot be read stops the rewrite: it
// needs recovering first. The new database is complete before it replaces
// the old one, by renaming directories, so a crash leaves one or the other.
// Logs taken from the engine stay valid.
func (e *Engine) Rewrite(keep []uint32, gid uint32, from uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("log engine is closed")
	}
	ids := slices.Clone(keep)
	if !slices.Contains(ids, gid) && from > 0 {
		ids = append(ids, gid)
	}
	fresh := e.dir + ".new"
	if err := os.RemoveAll(fresh); err != nil {
		return err
	}
	ndb, err := openDB(fresh, e.logger)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id == gid && from == 0 {
			continue
		}
		if err := e.copyGroup(ndb, id, gid, from); err != nil {
			ndb.Close()
			os.RemoveAll(fresh)
			return fmt.Errorf("rewrite the log engine: %w", err)
		}
	}
	if err := errors.Join(ndb.Flush(), ndb.Close()); err != nil {
		os.RemoveAll(fresh)
		return fmt.Errorf("rewrite the log engine: %w", err)
	}
	if err := e.db.Close(); err != nil {
		return fmt.Errorf("rewrite the log engine: close: %w", err)
	}
	old := e.dir + ".old"
	os.RemoveAll(old)
	err = os.Rename(e.dir, old)
	if err == nil {
		err = os.Rename(fresh, e.dir)
	}
	if err == nil {
		err = syncDir(filepath.Dir(e.dir))
	}
	if err != nil {
		return fmt.Errorf("rewrite the log engine: swap %s: %w", fresh, err)
	}
	os.RemoveAll(old)
	if e.db, err = openDB(e.dir, e.logger); err != nil {
		e.closed = true
		return err
	}
	for _, l := range e.groups {
		if err := l.loadBounds(); err != nil {
			return err
		}
	}
	return nil
}

// copyGroup copies group id into ndb, less entries from on if id is gid.
func (e *Engine) copyGroup(ndb *pebble.DB, id, gid uint32, from uint64) error {
	l := e.groups[id]
	if l == nil {
		l = &Log{e: e, gid: id}
		if err := l.loadBounds(); err != nil {
			return fmt.Errorf("group %d: %w (recover that group first)", id, err)
		}
	}
	first, last, broken := l.first, l.last, l.broken
	if broken != nil {
		return fmt.Errorf("group %d: %w (recover that group first)", id, broken)
	}
	b := ndb.NewBatch()
	flush := func(force bool) error {
		if b.Len() < 4<<20 && !force {
			return nil
		}
		err := b.Commit(pebble.NoSync)
		b.Close()
		b = ndb.NewBatch()
		return err
	}
	defer func() { b.Close() }()
	for i := first; i <= last && last > 0; i++ {
		if id == gid && i >= from {
			break
		}
		v, closer, err := e.db.Get(logKey(id, i))
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			continue
		case err != nil:
			err = b.Set(logKey(id, i), []byte("unreadable before the log engine was rewritten: "+firstLine(err)), nil)
		default:
			err = b.Set(logKey(id, i), v, nil)
			closer.Close()
		}
		if err != nil {
			return err
		}
		if err := flush(false); err != nil {
			return err
		}
	}
	for _, kind := range []byte{kindStable, kindMark} {
		p := groupPrefix(kind, id)
		it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			if err := b.Set(it.Key(), it.Value(), nil); err != nil {
				it.Close()
				return err
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("group %d: read its stable store: %s", id, firstLine(err))
		}
	}
	return flush(true)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
