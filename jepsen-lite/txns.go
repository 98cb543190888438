package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// The transactional workload (MULTI/EXEC and WATCH, docs/TRANSACTIONS.md).
// Transaction workers, one per node, connect to their node with go-redis
// and alternate two transactions on the keys of one slot:
//
//   - pair: MULTI, BF.EXISTS txA x, BF.ADD txA x, BF.ADD txB x, EXEC with a
//     fresh item x. Acknowledged, it must answer [0 1 1]: the item was in
//     neither filter before and the transaction applied once. Whatever its
//     outcome, after healing every replica holds x in both filters or in
//     neither (all or nothing), and in both if it was acknowledged.
//   - sequence: WATCH txSeq, n = BF.CARD txSeq, MULTI, BF.ADD txSeq "n",
//     EXEC, retried while WATCH aborts it. Every committed transaction saw a
//     different n (an add of a number already there answers 0: an update was
//     lost), and the filter ends holding at least the committed numbers and
//     at most those plus the ones of unknown outcome.
//
// The Bloom filters have an error rate of 1e-9, so a false positive does not
// pass for a partial transaction.
const (
	txKeyA   = "{jtx}a"
	txKeyB   = "{jtx}b"
	txSeqKey = "{jtx}seq"
	txRate   = 1e-9
	txCap    = 200000
)

// checkTransactions is the check of the transactional workload.
const checkTransactions = "transactions"

// txLog is what the transaction workers did.
type txLog struct {
	mu        sync.Mutex
	pairs     []txPair
	committed map[int64]bool // sequence numbers added by committed transactions
	unknown   int            // sequence transactions of unknown outcome
	aborted   int            // sequence transactions WATCH aborted (retried)
	problems  []string       // wrong answers seen while running
	errs      map[string]int // errors by text, for the log
}

// errorsSeen lists the commonest errors the workers saw.
func (l *txLog) errorsSeen(n int) []string {
	type e struct {
		text  string
		count int
	}
	var all []e
	for t, c := range l.errs {
		all = append(all, e{t, c})
	}
	slices.SortFunc(all, func(a, b e) int { return cmp.Or(b.count-a.count, strings.Compare(a.text, b.text)) })
	var out []string
	for _, x := range all[:min(n, len(all))] {
		out = append(out, fmt.Sprintf("%dx %s", x.count, x.text))
	}
	return out
}

// noteErr counts err; the caller holds mu.
func (l *txLog) noteErr(err error) {
	if err == nil {
		return
	}
	t := err.Error()
	if len(t) > 80 {
		t = t[:80]
	}
	l.errs[t]++
}

type txPair struct {
	item  string
	acked bool
}

func (l *txLog) problem(format string, args ...any) {
	l.mu.Lock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// createTxFilters makes the transactional workload's filters.
func createTxFilters(ctx context.Context, nc nodeConn) error {
	r := nc.open(0, false, 5*time.Second, 1)
	defer r.Close()
	for _, k := range []string{txKeyA, txKeyB, txSeqKey} {
		var err error
		for range 50 {
			if err = r.BFReserve(ctx, k, txRate, txCap).Err(); err == nil || isExists(err) {
				err = nil
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", k, err)
		}
	}
	return nil
}

func isExists(err error) bool { return err != nil && err.Error() == "ERR item exists" }

// txWorker runs transactions through the node in slot until ctx ends.
func txWorker(ctx context.Context, id, slot int, nc nodeConn, opTimeout time.Duration, l *txLog) {
	r := nc.open(slot, false, 2*time.Second, 1)
	defer r.Close()
	for i := 0; ctx.Err() == nil; i++ {
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		var err error
		if i%2 == 0 {
			err = txPairStep(octx, r, fmt.Sprintf("t%d-%d", id, i), l)
		} else {
			err = txSeqStep(octx, r, id, l)
		}
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond) // a node down or cut off: no busy loop
		}
	}
}

func txPairStep(ctx context.Context, r *redis.Client, item string, l *txLog) error {
	var before, addA, addB *redis.BoolCmd
	_, err := r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		before = p.BFExists(ctx, txKeyA, item)
		addA = p.BFAdd(ctx, txKeyA, item)
		addB = p.BFAdd(ctx, txKeyB, item)
		return nil
	})
	l.mu.Lock()
	l.pairs = append(l.pairs, txPair{item: item, acked: err == nil})
	l.noteErr(err)
	l.mu.Unlock()
	if err == nil && (before.Val() || !addA.Val() || !addB.Val()) {
		l.problem("transaction on %s answered exists %v, adds %v %v: want false, true, true",
			item, before.Val(), addA.Val(), addB.Val())
	}
	return err
}

func txSeqStep(ctx context.Context, r *redis.Client, id int, l *txLog) error {
	var n int64
	var add *redis.BoolCmd
	err := r.Watch(ctx, func(tx *redis.Tx) error {
		var err error
		if n, err = tx.BFCard(ctx, txSeqKey).Result(); err != nil {
			return errNoTx{err}
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			add = p.BFAdd(ctx, txSeqKey, fmt.Sprint(n))
			return nil
		})
		return err
	}, txSeqKey)
	l.mu.Lock()
	defer l.mu.Unlock()
	var before errNoTx
	if !errors.Is(err, redis.TxFailedErr) {
		l.noteErr(err)
	}
	switch {
	case errors.Is(err, redis.TxFailedErr):
		l.aborted++
	case errors.As(err, &before), notApplied(err):
		// Failed before MULTI, or refused: nothing applied.
	case err != nil:
		l.unknown++
	case !add.Val():
		l.problems = append(l.problems, fmt.Sprintf("worker %d: sequence number %d added twice: WATCH lost an update", id, n))
	default:
		if l.committed[n] {
			l.problems = append(l.problems, fmt.Sprintf("sequence number %d committed twice", n))
		}
		l.committed[n] = true
	}
	if errors.Is(err, redis.TxFailedErr) {
		return nil
	}
	return err
}

// notApplied reports whether err says for sure that EXEC applied nothing:
// the node could not be reached, or answered that no leader took it.
func notApplied(err error) bool {
	if err == nil {
		return false
	}
	t := err.Error()
	return strings.Contains(t, "connection refused") || strings.HasPrefix(t, "CLUSTERDOWN") ||
		strings.HasPrefix(t, "TRYAGAIN") || strings.HasPrefix(t, "EXECABORT")
}

// errNoTx marks a failure before the transaction was sent.
type errNoTx struct{ error }

// checkTxFinal checks every replica of the transactions' shard (holds) after
// healing against what the workers did.
func checkTxFinal(cl *nodeproc.Cluster, sm shardMap, l *txLog, rep *Report) {
	rep.Transactions, rep.TxAborted, rep.TxUnknown = int64(len(l.pairs)+len(l.committed)), int64(l.aborted), int64(l.unknown)
	for _, p := range l.problems {
		rep.fail(checkTransactions, "%s", p)
	}
	ctx := context.Background()
	items := make([]string, 0, len(l.pairs))
	for _, p := range l.pairs {
		items = append(items, p.item)
	}
	for _, m := range cl.Nodes {
		if !sm.holder(m.ID)(txKeyA) {
			continue
		}
		r := finalClient(cl, m)
		err := func() error {
			a, err := mexists(ctx, r, txKeyA, items)
			if err != nil {
				return err
			}
			b, err := mexists(ctx, r, txKeyB, items)
			if err != nil {
				return err
			}
			for i, p := range l.pairs {
				switch {
				case a[i] != b[i]:
					rep.fail(checkTransactions, "%s: transaction %s applied partly: in %s %v, in %s %v", m.ID, p.item, txKeyA, a[i], txKeyB, b[i])
				case p.acked && !a[i]:
					rep.fail(checkTransactions, "%s: acknowledged transaction %s missing", m.ID, p.item)
				}
			}
			card, err := r.BFCard(ctx, txSeqKey).Result()
			if err != nil {
				return err
			}
			if lo, hi := int64(len(l.committed)), int64(len(l.committed)+l.unknown); card < lo || card > hi {
				rep.fail(checkTransactions, "%s: %s holds %d numbers, want %d to %d", m.ID, txSeqKey, card, lo, hi)
			}
			for n := range l.committed {
				if ok, err := r.BFExists(ctx, txSeqKey, fmt.Sprint(n)).Result(); err != nil {
					return err
				} else if !ok {
					rep.fail(checkTransactions, "%s: committed sequence number %d missing", m.ID, n)
				}
			}
			return nil
		}()
		r.Close()
		if err != nil {
			rep.fail(checkRecovery, "%s: transactions' final reads: %v", m.ID, err)
		}
	}
}

// mexists asks BF.MEXISTS for items, a thousand at a time.
func mexists(ctx context.Context, r *redis.Client, key string, items []string) ([]bool, error) {
	var out []bool
	for _, part := range chunks(items, 1000) {
		got, err := r.BFMExists(ctx, key, part...).Result()
		if err != nil {
			return nil, fmt.Errorf("BF.MEXISTS %s: %w", key, err)
		}
		out = append(out, got...)
	}
	return out, nil
}
