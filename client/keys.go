package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sessions. Every write goes out as IDEM session seq <command>; the cluster
// keeps, per session, the answers of its latest 128 sequence numbers for 15
// minutes after the session's last request, and answers a replay of any of them
// with the first answer instead of applying it again.

// perSession is how many writes the client numbers in one session before it
// takes another, when they may be outstanding together (a pipeline's writes,
// a batch of keys). It stays under the cluster's window of 128 answers per
// session, so no answer is dropped while its write may still be retried.
const perSession = 64

// KeyLifetime is how long after NewKey a Key may be sent. The cluster forgets a
// session 15 minutes after its last request; a key is refused (ErrKeyExpired)
// a minute before that, so that a retry never reaches a cluster that has
// forgotten the first attempt and would apply it again.
const KeyLifetime = 14 * time.Minute

// Key names one write so that it can be re-sent, by this process or another,
// and still be applied at most once: a write sent again under the same Key is
// answered with its first answer. A Key is one write's: send it with the same
// command and arguments only.
type Key struct {
	Session uint64    // the session; never zero
	Seq     uint64    // the sequence number in the session; never zero
	Made    time.Time // when NewKey made it; KeyLifetime counts from here
}

// String encodes the key as session-seq-made (hexadecimal session, decimal
// sequence number, Unix milliseconds), as ParseKey reads it.
func (k Key) String() string {
	return fmt.Sprintf("%x-%d-%d", k.Session, k.Seq, k.Made.UnixMilli())
}

// ParseKey reads a key that String wrote.
func ParseKey(s string) (Key, error) {
	f := strings.Split(s, "-")
	if len(f) != 3 {
		return Key{}, fmt.Errorf("rookery: bad key %q: want session-seq-made", s)
	}
	sess, err1 := strconv.ParseUint(f[0], 16, 64)
	seq, err2 := strconv.ParseUint(f[1], 10, 64)
	ms, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || sess == 0 || seq == 0 {
		return Key{}, fmt.Errorf("rookery: bad key %q", s)
	}
	return Key{Session: sess, Seq: seq, Made: time.UnixMilli(ms)}, nil
}

// MarshalText is String, for storing a key in JSON or a database.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText is ParseKey.
func (k *Key) UnmarshalText(b []byte) error {
	v, err := ParseKey(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// NewKey returns a key for one write that a caller may have to retry across
// calls, or across restarts if the caller stores it (String, MarshalText).
// Make it just before the first attempt: it may be sent for KeyLifetime.
func (c *Client) NewKey() Key {
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	// Keys of one session are never more than perSession, so the cluster
	// keeps every one of their answers while the session lives.
	if c.keySession == nil || c.keySession.seq >= perSession {
		c.keySession = &session{id: newSessionID()}
	}
	return Key{Session: c.keySession.id, Seq: c.keySession.next(), Made: time.Now()}
}

type keyKey struct{}

// WithKey returns a context whose write goes out under k: the first attempt
// and every retry, in this call or a later one with the same key, is applied
// at most once in all, and all are answered with the first answer. Reads
// ignore it; a call that makes several writes (a Pipeline, a Bulk) refuses it.
func WithKey(ctx context.Context, k Key) context.Context {
	return context.WithValue(ctx, keyKey{}, k)
}

func keyOf(ctx context.Context) (Key, bool) {
	k, ok := ctx.Value(keyKey{}).(Key)
	return k, ok
}

// checkKey refuses a key that cannot be sent safely.
func checkKey(k Key) error {
	switch {
	case k.Session == 0 || k.Seq == 0:
		return errors.New("rookery: key without session or sequence number; make keys with NewKey")
	case time.Since(k.Made) > KeyLifetime:
		return fmt.Errorf("%w: key %s made %v ago (lifetime %v)", ErrKeyExpired, k,
			time.Since(k.Made).Round(time.Second), KeyLifetime)
	}
	return nil
}

// session numbers the writes of one session.
type session struct {
	id  uint64
	seq uint64
}

func (s *session) next() uint64 {
	s.seq++
	return s.seq
}

func newSessionID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		// 63 bits, so that any RESP client or log tool reads it as a
		// positive integer; never zero, which means "no session".
		if id := binary.LittleEndian.Uint64(b[:]) >> 1; id != 0 {
			return id
		}
	}
}

// sessionPool lends sessions to calls. A session is lent to one call at a
// time, which numbers at most perSession writes in it, so every write the call
// may still retry keeps its answer in the cluster's window.
type sessionPool struct {
	mu   sync.Mutex
	free []*session
}

func (p *sessionPool) get() *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s
	}
	return &session{id: newSessionID()}
}

func (p *sessionPool) put(s *session) {
	p.mu.Lock()
	p.free = append(p.free, s)
	p.mu.Unlock()
}
