package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rookerydb/rookery/client"
)

// The store of record: one bbolt file. It decides what a coupon is; the filter
// only saves lookups here. Three buckets:
//
//	coupons  code -> Coupon (JSON)
//	outbox   op id (8 bytes, big-endian, in creation order) -> Op (JSON)
//	stale    code -> when a redeem's delete was given up on (see Store.MarkStale)
//
// Every change to a coupon and the filter operation it calls for are written
// in one transaction: the operation, with the client.Key it will be sent
// under, is on disk before it is sent, so whoever sends it again (the
// handler's retries, the outbox loop, the next run of the service) sends it
// under the same key and the cluster applies it once in all.

var (
	bucketCoupons = []byte("coupons")
	bucketOutbox  = []byte("outbox")
	bucketStale   = []byte("stale")
)

// State is where a coupon is in its life.
type State string

// States of a coupon.
const (
	StateIssued   State = "issued"   // exists and may be redeemed
	StateRedeemed State = "redeemed" // used; never again
	StateVoid     State = "void"     // the filter had no room for it: never valid
)

// Coupon is the record of one code.
type Coupon struct {
	Code       string     `json:"code"`
	Campaign   string     `json:"campaign"`
	State      State      `json:"state"`
	IssuedAt   time.Time  `json:"issued_at"`
	RedeemedAt *time.Time `json:"redeemed_at,omitempty"`
	// Pending is the filter operation still to be confirmed: "add" from
	// issue until the filter holds the code, "delete" from redeem until the
	// filter no longer does.
	Pending string `json:"pending,omitempty"`
	// Stale: the filter may still hold this redeemed code (see MarkStale).
	Stale bool `json:"stale,omitempty"`
}

// Kinds of filter operation.
const (
	opAdd    = "add"    // CF.INSERT of Codes
	opDelete = "delete" // CF.DEL of Codes[0]
)

// Op is a filter operation the service must still finish: an entry of the
// outbox.
type Op struct {
	ID    uint64     `json:"id"`
	Kind  string     `json:"kind"`
	Codes []string   `json:"codes"`
	Key   client.Key `json:"key"` // what it is sent under, every time
	Since time.Time  `json:"since"`
}

// Outcome is what the store decided about a redeem.
type Outcome int

// Outcomes of Store.Redeem.
const (
	NoSuchCoupon    Outcome = iota // never issued (or void): the filter's yes was a false positive
	AlreadyRedeemed                // used before
	NotYetActive                   // issued, but the filter has not confirmed it yet
	Redeemed                       // used now, by this call
)

// ErrCodeTaken: a code to issue exists already (60 random bits make this a
// once-in-a-lifetime event; the caller draws new codes).
var ErrCodeTaken = errors.New("code exists already")

// Store is the store of record.
type Store struct {
	db *bolt.DB
}

// OpenStore opens (or creates) the store at path.
func OpenStore(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketCoupons, bucketOutbox, bucketStale} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Issue records codes as issued coupons of campaign and, in the same
// transaction, the CF.INSERT operations that put them in the filter: one per
// chunk of codes, the i-th sent under keys[i]. All or nothing.
func (s *Store) Issue(campaign string, codes []string, keys []client.Key, chunk int, now time.Time) ([]Op, error) {
	var ops []Op
	err := s.db.Update(func(tx *bolt.Tx) error {
		ops = ops[:0]
		cb := tx.Bucket(bucketCoupons)
		for i, key := range keys {
			part := codes[i*chunk : min((i+1)*chunk, len(codes))]
			for _, code := range part {
				if cb.Get([]byte(code)) != nil {
					return fmt.Errorf("%w: %s", ErrCodeTaken, code)
				}
				c := Coupon{Code: code, Campaign: campaign, State: StateIssued, IssuedAt: now, Pending: opAdd}
				if err := putJSON(cb, code, c); err != nil {
					return err
				}
			}
			op, err := addOp(tx, Op{Kind: opAdd, Codes: part, Key: key, Since: now})
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		return nil
	})
	return ops, err
}

// Redeem decides a redeem of code in one transaction: if the coupon exists,
// is issued and active, it becomes redeemed, and the CF.DEL that takes it out
// of the filter is recorded with key. Two redeems of one code are serialised
// here, so exactly one of them gets Redeemed. The Op is set only then.
func (s *Store) Redeem(code string, key client.Key, now time.Time) (Outcome, Op, error) {
	var out Outcome
	var op Op
	// Batch folds concurrent redeems into one transaction and one fsync. It
	// may run the function more than once: it sets every result each time.
	err := s.db.Batch(func(tx *bolt.Tx) error {
		out, op = NoSuchCoupon, Op{}
		cb := tx.Bucket(bucketCoupons)
		c, ok, err := getCoupon(cb, code)
		switch {
		case err != nil:
			return err
		case !ok || c.State == StateVoid:
			return nil
		case c.State == StateRedeemed:
			out = AlreadyRedeemed
			return nil
		case c.Pending == opAdd:
			// The filter has not confirmed the add: a CF.DEL now could run
			// before it, or remove another code's fingerprint.
			out = NotYetActive
			return nil
		}
		c.State, c.RedeemedAt, c.Pending = StateRedeemed, &now, opDelete
		if err := putJSON(cb, code, c); err != nil {
			return err
		}
		op, err = addOp(tx, Op{Kind: opDelete, Codes: []string{code}, Key: key, Since: now})
		out = Redeemed
		return err
	})
	return out, op, err
}

// SettleAdd records the answer to op's CF.INSERT: per code, whether the
// filter took it. A code it had no room for becomes void.
func (s *Store) SettleAdd(op Op, added []bool) error {
	if len(added) != len(op.Codes) {
		return fmt.Errorf("settle op %d: %d answers for %d codes", op.ID, len(added), len(op.Codes))
	}
	return s.db.Batch(func(tx *bolt.Tx) error {
		cb := tx.Bucket(bucketCoupons)
		for i, code := range op.Codes {
			err := updateCoupon(cb, code, func(c *Coupon) {
				c.Pending = ""
				if !added[i] {
					c.State = StateVoid
				}
			})
			if err != nil {
				return err
			}
		}
		return deleteOp(tx, op.ID)
	})
}

// SettleDelete records that op's CF.DEL was answered: the filter no longer
// holds the redeemed code.
func (s *Store) SettleDelete(op Op) error {
	return s.db.Batch(func(tx *bolt.Tx) error {
		if err := updateCoupon(tx.Bucket(bucketCoupons), op.Codes[0], func(c *Coupon) { c.Pending = "" }); err != nil {
			return err
		}
		return deleteOp(tx, op.ID)
	})
}

// MarkStale gives up on op's CF.DEL: its key expired before the cluster
// answered and the filter still reports the code, so whether it applied is
// unknowable. The fingerprint is left in place (the outbox loop explains
// why), and the coupon is marked so that the stale entries can be counted.
func (s *Store) MarkStale(op Op, now time.Time) error {
	code := op.Codes[0]
	return s.db.Update(func(tx *bolt.Tx) error {
		err := updateCoupon(tx.Bucket(bucketCoupons), code, func(c *Coupon) { c.Pending, c.Stale = "", true })
		if err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketStale), code, now); err != nil {
			return err
		}
		return deleteOp(tx, op.ID)
	})
}

// Rekey stores a new key for op, before op is sent under it.
func (s *Store) Rekey(op Op, key client.Key) (Op, error) {
	op.Key = key
	err := s.db.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bucketOutbox), string(idKey(op.ID)), op)
	})
	return op, err
}

// Unissue takes back the coupons of ops and ops themselves, when nothing of
// them reached the filter and none was handed out.
func (s *Store) Unissue(ops []Op) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		cb := tx.Bucket(bucketCoupons)
		for _, op := range ops {
			for _, code := range op.Codes {
				if err := cb.Delete([]byte(code)); err != nil {
					return err
				}
			}
			if err := deleteOp(tx, op.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// Get returns the coupon of code, if there is one.
func (s *Store) Get(code string) (Coupon, bool, error) {
	var c Coupon
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		c, ok, err = getCoupon(tx.Bucket(bucketCoupons), code)
		return err
	})
	return c, ok, err
}

// Pending returns the outbox, oldest first.
func (s *Store) Pending() ([]Op, error) {
	var ops []Op
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(_, v []byte) error {
			var op Op
			if err := json.Unmarshal(v, &op); err != nil {
				return fmt.Errorf("outbox entry: %w", err)
			}
			ops = append(ops, op)
			return nil
		})
	})
	return ops, err
}

// Counts returns the number of outbox entries and of stale codes.
func (s *Store) Counts() (pending, stale int, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		pending = tx.Bucket(bucketOutbox).Stats().KeyN
		stale = tx.Bucket(bucketStale).Stats().KeyN
		return nil
	})
	return pending, stale, err
}

func addOp(tx *bolt.Tx, op Op) (Op, error) {
	b := tx.Bucket(bucketOutbox)
	id, err := b.NextSequence()
	if err != nil {
		return op, err
	}
	op.ID = id
	return op, putJSON(b, string(idKey(id)), op)
}

func deleteOp(tx *bolt.Tx, id uint64) error {
	return tx.Bucket(bucketOutbox).Delete(idKey(id))
}

func idKey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

func getCoupon(b *bolt.Bucket, code string) (Coupon, bool, error) {
	var c Coupon
	v := b.Get([]byte(code))
	if v == nil {
		return c, false, nil
	}
	if err := json.Unmarshal(v, &c); err != nil {
		return c, false, fmt.Errorf("coupon %s: %w", code, err)
	}
	return c, true, nil
}

func updateCoupon(b *bolt.Bucket, code string, f func(*Coupon)) error {
	c, ok, err := getCoupon(b, code)
	if err != nil || !ok {
		return err // a coupon taken back (Unissue) has nothing to update
	}
	f(&c)
	return putJSON(b, code, c)
}

func putJSON(b *bolt.Bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), data)
}
