package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Kind is a filter family, for bulk loads.
type Kind int

// Filter families.
const (
	// KindBloom loads with BF.MADD (BF.INSERT ... NOCREATE with NoCreate).
	KindBloom Kind = iota
	// KindCuckoo loads with CF.INSERT (CF.INSERTNX with NX).
	KindCuckoo
	// KindCounting loads with CBF.MADD.
	KindCounting
)

// BulkOptions configure a bulk load. Zero fields take the defaults in brackets.
type BulkOptions struct {
	// Chunk is the items of one command [5000]; the nodes take at most
	// 100,000 (--max-items) and 64 MiB (--max-request-size) per command.
	Chunk int
	// InFlight is how many chunks may await their answers at once [16]. The
	// leader commits the writes waiting at each moment as one log entry of
	// up to 4 MiB, so a load goes fastest with a few such entries' worth of
	// items in flight (Chunk × InFlight of 50,000 to 500,000 16-byte items).
	InFlight int
	// NoCreate fails with ErrNotFound if the filter does not exist, instead of
	// creating it with the defaults (which suit a hundred items, not a load).
	// Bloom and cuckoo only.
	NoCreate bool
	// NX adds a cuckoo item only if it may not be there already (CF.INSERTNX),
	// which makes loading the same items twice add them once.
	NX bool
	// OnChunk, if set, receives every chunk's outcome, in the order of the
	// items, on one goroutine of the Bulk's; it must not call the Bulk.
	OnChunk func(ChunkResult)
}

// ChunkResult is the outcome of one chunk of a bulk load.
type ChunkResult struct {
	// Offset is the position of the chunk's first item among all items added.
	Offset int64
	// Added says, per item, whether it was new (Bloom: not seen before, or a
	// false positive; counting: absent before) or, for cuckoo, added (false:
	// no room, or with NX there already). It may be shorter than the chunk
	// when Err is set.
	Added []bool
	// Err is the chunk's error: ErrFull if an item found no room, or as a
	// single write's (ErrIndeterminate: the chunk may have been applied).
	Err error
}

// Bulk adds a stream of items to one filter: it cuts them into chunks of
// Chunk items, sends each as one write (one log entry, exactly once however
// often it is retried) and keeps InFlight of them outstanding, so that the
// stream is bounded by the cluster's throughput rather than by round trips.
// Add and Close are called from one goroutine.
type Bulk struct {
	c    *Client
	ctx  context.Context
	kind Kind
	key  string
	o    BulkOptions

	buf    []string
	off    int64
	closed bool
	slots  chan struct{}
	queue  chan *chunk
	done   chan struct{}

	mu    sync.Mutex
	err   error
	acked atomic.Int64
}

type chunk struct {
	off   int64
	items []string
	res   ChunkResult
	done  chan struct{}
}

// NewBulk starts a bulk load into the filter key of kind. ctx bounds the whole
// load: when it ends, chunks still to be sent fail.
func (c *Client) NewBulk(ctx context.Context, kind Kind, key string, o BulkOptions) *Bulk {
	if o.Chunk <= 0 {
		o.Chunk = 5000
	}
	if o.InFlight <= 0 {
		o.InFlight = 16
	}
	b := &Bulk{c: c, ctx: ctx, kind: kind, key: key, o: o,
		slots: make(chan struct{}, o.InFlight), queue: make(chan *chunk, o.InFlight), done: make(chan struct{})}
	switch {
	case kind == KindCounting && o.NoCreate:
		b.err = errors.New("rookery: NoCreate is for Bloom and cuckoo filters")
	case o.NX && kind != KindCuckoo:
		b.err = errors.New("rookery: NX is for cuckoo filters")
	case kind < KindBloom || kind > KindCounting:
		b.err = fmt.Errorf("rookery: unknown kind %d", kind)
	}
	if _, ok := keyOf(ctx); ok {
		b.err = errors.New("rookery: WithKey names one write; a bulk load numbers its own")
	}
	go b.deliver()
	return b
}

// Add queues items, sending every full chunk; it blocks while InFlight chunks
// are outstanding. It returns the first error of the load so far; after one,
// nothing more is sent.
func (b *Bulk) Add(items ...string) error {
	if b.closed {
		return errBulkClosed
	}
	for len(items) > 0 {
		if err := b.Err(); err != nil {
			return err
		}
		n := min(b.o.Chunk-len(b.buf), len(items))
		b.buf = append(b.buf, items[:n]...)
		items = items[n:]
		if len(b.buf) == b.o.Chunk {
			b.send()
		}
	}
	return b.Err()
}

var errBulkClosed = errors.New("rookery: bulk load closed")

// Close sends what is left, waits for every chunk's answer and returns the
// first error of the load.
func (b *Bulk) Close() error {
	if b.closed {
		return b.Err()
	}
	b.closed = true
	if len(b.buf) > 0 && b.Err() == nil {
		b.send()
	}
	close(b.queue)
	<-b.done
	return b.Err()
}

// Err is the first error of the load so far.
func (b *Bulk) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Acked is how many items, from the first, are in chunks that succeeded: a
// load stopped by an error can resume after them. Later chunks may have been
// applied too (those that succeeded after a failed one, or failed with
// ErrIndeterminate): resuming adds them again, which a Bloom filter absorbs
// and a cuckoo filter does with NX.
//
// To stop a load cleanly, stop calling Add and call Close: the chunks in
// flight finish. Cancelling the context abandons them instead.
func (b *Bulk) Acked() int64 { return b.acked.Load() }

// send starts the buffered chunk.
func (b *Bulk) send() {
	ch := &chunk{off: b.off, items: b.buf, done: make(chan struct{})}
	b.off += int64(len(b.buf))
	b.buf = make([]string, 0, b.o.Chunk)
	select {
	case b.slots <- struct{}{}:
	case <-b.ctx.Done():
		b.setErr(fmt.Errorf("%w: %w", ErrUnavailable, b.ctx.Err()))
		return
	}
	b.queue <- ch
	go func() {
		defer close(ch.done)
		ch.res = ChunkResult{Offset: ch.off}
		ch.res.Added, ch.res.Err = do(b.ctx, b.c, b.op(ch.items))
	}()
}

// deliver hands chunk outcomes over in order and frees their slots.
func (b *Bulk) deliver() {
	defer close(b.done)
	prefix := true
	for ch := range b.queue {
		<-ch.done
		if ch.res.Err != nil {
			prefix = false
			b.setErr(fmt.Errorf("items %d to %d: %w", ch.off, ch.off+int64(len(ch.items))-1, ch.res.Err))
		} else if prefix {
			b.acked.Store(ch.off + int64(len(ch.items)))
		}
		if b.o.OnChunk != nil {
			b.o.OnChunk(ch.res)
		}
		<-b.slots
	}
}

func (b *Bulk) setErr(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// op is the write that adds items.
func (b *Bulk) op(items []string) op[[]bool] {
	var args []string
	switch {
	case b.kind == KindBloom && b.o.NoCreate:
		args = []string{"BF.INSERT", b.key, "NOCREATE", "ITEMS"}
	case b.kind == KindBloom:
		args = []string{"BF.MADD", b.key}
	case b.kind == KindCuckoo:
		args = []string{"CF.INSERT", b.key}
		if b.o.NX {
			args[0] = "CF.INSERTNX"
		}
		if b.o.NoCreate {
			args = append(args, "NOCREATE")
		}
		args = append(args, "ITEMS")
	default:
		args = []string{"CBF.MADD", b.key}
	}
	args = append(make([]string, 0, len(args)+len(items)), args...)
	return op[[]bool]{args: append(args, items...), write: true, decode: asAdded}
}

// asAdded reads an array of 1 (added), 0 (there already) and -1 (no room),
// which may end in an error.
func asAdded(r reply) ([]bool, error) {
	out, err := asBools(r)
	if err != nil {
		return out, err
	}
	full := 0
	for _, e := range r.arr {
		if e.num < 0 {
			full++
		}
	}
	if full > 0 {
		return out, fmt.Errorf("%w: %d of %d items found no room", ErrFull, full, len(out))
	}
	return out, nil
}

// AddAll adds items to the filter key of kind through a Bulk and returns, per
// item, what ChunkResult.Added says. On an error the items of the chunks
// that failed read false, and the error names the first such chunk's items.
func (c *Client) AddAll(ctx context.Context, kind Kind, key string, items []string, o *BulkOptions) ([]bool, error) {
	var opts BulkOptions
	if o != nil {
		opts = *o
	}
	out := make([]bool, len(items))
	user := opts.OnChunk
	opts.OnChunk = func(r ChunkResult) {
		copy(out[r.Offset:], r.Added)
		if user != nil {
			user(r)
		}
	}
	b := c.NewBulk(ctx, kind, key, opts)
	if err := b.Add(items...); err != nil {
		b.Close()
		return out, err
	}
	return out, b.Close()
}
