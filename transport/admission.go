package transport

// Connection slots. Config.MaxClients bounds the connections open at once. When
// a password is required, connections that have not authenticated yet
// ("strangers") may hold only part of the slots, and a newcomer that finds no
// room closes the oldest stranger instead of being refused. A flood of
// unauthenticated connections then churns through its own share, while a client
// with the password that connects and authenticates at once always gets in.
// Only when every slot is held by an authenticated connection is a newcomer
// refused ("ERR max number of clients reached"). Without a password every
// connection counts as authenticated from the start.
//
// A closed stranger is not told why: like a Redis client killed for its
// timeout, it sees its connection end.

// slots is the accounting of the connection slots, guarded by Server.mu. The
// number of connections holding a slot is Server.clients.
type slots struct {
	max       int // Config.MaxClients
	strangers int // most slots strangers may hold
	nStranger int // strangers holding a slot
	// The strangers in accept order, linked through conn.older and conn.newer:
	// the oldest is closed first.
	oldest, newest *conn
}

// newSlots reserves a quarter of maxClients (at least one slot) for
// authenticated connections; strangers may hold the rest, and always at least
// one slot, or nobody could connect to authenticate.
func newSlots(maxClients int) slots {
	return slots{max: maxClients, strangers: max(1, maxClients-max(1, maxClients/4))}
}

// admit gives c a slot. It first closes the oldest stranger if strangers hold
// their whole share and c is one more, or if every slot is taken and a stranger
// holds one. It reports false when every slot is held by an authenticated
// connection. The connection to close is returned rather than closed, so the
// caller does it after releasing s.mu. Called with s.mu held.
func (s *Server) admit(c *conn) (ok bool, evict *conn) {
	sl := &s.slots
	full := s.clients.Load() >= int64(sl.max)
	if full || c.stranger && sl.nStranger >= sl.strangers {
		evict = sl.oldest
		if evict == nil {
			return false, nil
		}
		s.unlinkStranger(evict)
		s.freeSlot(evict)
		s.m.evicted.Inc()
	}
	c.slotHeld = true
	s.clients.Add(1)
	s.m.conns.Inc()
	if c.stranger {
		c.older, c.newer = sl.newest, nil
		if sl.newest != nil {
			sl.newest.newer = c
		} else {
			sl.oldest = c
		}
		sl.newest = c
		sl.nStranger++
	}
	return true, evict
}

// promote moves c, which has just authenticated, out of the strangers' share.
// A stranger closed to make room while it was authenticating stays closed.
func (s *Server) promote(c *conn) {
	s.mu.Lock()
	s.unlinkStranger(c)
	s.mu.Unlock()
}

// releaseSlot gives back c's slot when its goroutine ends, unless eviction
// already did. Called with s.mu held.
func (s *Server) releaseSlot(c *conn) {
	s.unlinkStranger(c)
	s.freeSlot(c)
}

// unlinkStranger removes c from the strangers' list, if it is there. Called
// with s.mu held.
func (s *Server) unlinkStranger(c *conn) {
	if !c.stranger {
		return
	}
	sl := &s.slots
	if c.older != nil {
		c.older.newer = c.newer
	} else {
		sl.oldest = c.newer
	}
	if c.newer != nil {
		c.newer.older = c.older
	} else {
		sl.newest = c.older
	}
	c.older, c.newer, c.stranger = nil, nil, false
	sl.nStranger--
}

// freeSlot gives back c's slot once. Called with s.mu held.
func (s *Server) freeSlot(c *conn) {
	if !c.slotHeld {
		return
	}
	c.slotHeld = false
	s.clients.Add(-1)
	s.m.conns.Dec()
}
