package cluster

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/wire"
)

// A backup of a sharded cluster is a bundle: one backup file per shard, in
// shard order, each as the shard's leader sends it (backup.go), then the
// cluster's users, in a file that describes itself:
//
//	"RKYBUNDL"   magic
//	uint16       format version (2), little endian as the rest
//	uint32       the number of shards, n
//	n times:     uint64 length L, then L bytes: the shard's backup file
//	uint64       length U, then U bytes: group 0's users section
//	             (fsm.FSM.UsersSection; U = 0: the cluster never set users)
//	32 bytes     SHA-256 of everything above
//
// Version 1 is the same without the users: the users live in group 0 (the
// map group), which no shard's backup holds. A version 1 bundle still
// restores, and leaves the cluster's users as they are.
//
// rookery snapshot save writes one by asking each shard's leader for its
// backup and any node for the users (GET /v1/users, after a linearizable
// read of group 0); restore sends each part to the leader of the same shard
// of a cluster with as many shards, then the users to group 0 (POST
// /v1/users/restore). Each part verifies itself (VerifyBackup, and the
// users as the state machine would read them), and the trailing SHA-256
// catches a damaged, truncated or extended bundle.

const (
	bundleMagic = "RKYBUNDL"
	// bundleVersion is the version this build writes; it reads every one
	// from 1.
	bundleVersion = 2
	// bundleUsersVersion is the first version that carries the users.
	bundleUsersVersion = 2
	// maxBundleShards bounds the shard count read from a file.
	maxBundleShards = 16384
	// MaxBundleUsers bounds the users part (a cluster's users take
	// kilobytes), as POST /v1/users/restore bounds its body.
	MaxBundleUsers = 64 << 20
)

// IsBundle reports whether a file starting with head is a bundle.
func IsBundle(head []byte) bool {
	return len(head) >= len(bundleMagic) && string(head[:len(bundleMagic)]) == bundleMagic
}

// BundleWriter writes a bundle: NewBundleWriter, then Part for each shard in
// order, then Users, then Close.
type BundleWriter struct {
	w       io.Writer
	sum     hash.Hash
	version uint16
	parts   int
	want    int
	users   bool // the users part is written
}

// NewBundleWriter starts a bundle of shards parts on w.
func NewBundleWriter(w io.Writer, shards int) (*BundleWriter, error) {
	return newBundleWriter(w, shards, bundleVersion)
}

// newBundleWriter starts a bundle of the given version (1 in tests of what
// older builds wrote).
func newBundleWriter(w io.Writer, shards int, version uint16) (*BundleWriter, error) {
	b := &BundleWriter{sum: sha256.New(), want: shards, version: version}
	b.w = io.MultiWriter(w, b.sum)
	hdr := append([]byte(bundleMagic), 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint16(hdr[len(bundleMagic):], version)
	binary.LittleEndian.PutUint32(hdr[len(bundleMagic)+2:], uint32(shards))
	if _, err := b.w.Write(hdr); err != nil {
		return nil, err
	}
	return b, nil
}

// Part writes the next shard's backup, of size bytes, read from r, and
// verifies it as it goes.
func (b *BundleWriter) Part(r io.Reader, size int64) (*BackupInfo, error) {
	if b.parts == b.want {
		return nil, errors.New("bundle: more parts than shards")
	}
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(size))
	if _, err := b.w.Write(l[:]); err != nil {
		return nil, err
	}
	info, err := VerifyBackup(io.TeeReader(io.LimitReader(r, size), b.w))
	if err != nil {
		return nil, fmt.Errorf("shard %d's backup: %w", b.parts, err)
	}
	if info.FileBytes != size {
		return nil, fmt.Errorf("%w: shard %d's backup is %d bytes, announced %d", ErrBadBackup, b.parts, info.FileBytes, size)
	}
	b.parts++
	return info, nil
}

// Users writes the cluster's users after the last shard: sec is group 0's
// users section (GET /v1/users), empty when the cluster never set users. It
// is checked as the state machine would read it, and the number of users it
// holds returned.
func (b *BundleWriter) Users(sec []byte) (int, error) {
	switch {
	case b.version < bundleUsersVersion:
		return 0, fmt.Errorf("bundle: version %d carries no users", b.version)
	case b.parts != b.want:
		return 0, fmt.Errorf("bundle: the users go after the shards, and %d of %d are written", b.parts, b.want)
	case b.users:
		return 0, errors.New("bundle: the users are written already")
	case len(sec) > MaxBundleUsers:
		return 0, fmt.Errorf("%w: the users take %d bytes, more than %d", ErrBadBackup, len(sec), MaxBundleUsers)
	}
	n, err := fsm.CheckUsersSection(sec)
	if err != nil {
		return 0, fmt.Errorf("%w: the cluster's users: %v", ErrBadBackup, err)
	}
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(len(sec)))
	if _, err := b.w.Write(l[:]); err != nil {
		return 0, err
	}
	if _, err := b.w.Write(sec); err != nil {
		return 0, err
	}
	b.users = true
	return n, nil
}

// Close writes the trailing checksum.
func (b *BundleWriter) Close() error {
	if b.parts != b.want {
		return fmt.Errorf("bundle: %d of %d parts written", b.parts, b.want)
	}
	if b.version >= bundleUsersVersion && !b.users {
		// Writing "none" here would have a restore wipe the users.
		return errors.New("bundle: the cluster's users are not written")
	}
	_, err := b.w.Write(b.sum.Sum(nil))
	return err
}

// BundlePart is one shard of a bundle: where its backup starts in the file,
// and what it holds.
type BundlePart struct {
	Offset int64
	Info   *BackupInfo
}

// Bundle describes a verified bundle.
type Bundle struct {
	Version int
	Parts   []BundlePart // one per shard, in shard order
	// HasUsers: the bundle carries the cluster's users (version 2 on), which
	// a restore makes the cluster's. A version 1 bundle says nothing of them.
	HasUsers bool
	// Users is group 0's users section, for POST /v1/users/restore; empty
	// when the cluster never set users. UserCount is how many it holds.
	Users     []byte
	UserCount int
	// Size is the whole file's.
	Size int64
}

// VerifyBundle reads a whole bundle from r, verifying every part and the
// trailing checksum, and describes it.
func VerifyBundle(r io.Reader) (*Bundle, error) {
	sum := sha256.New()
	cr := &wire.CountReader{R: io.TeeReader(r, sum)}
	hdr := make([]byte, len(bundleMagic)+6)
	if _, err := io.ReadFull(cr, hdr); err != nil || !IsBundle(hdr) {
		return nil, fmt.Errorf("%w: not a bundle of shard backups", ErrBadBackup)
	}
	v := binary.LittleEndian.Uint16(hdr[len(bundleMagic):])
	if v == 0 || v > bundleVersion {
		return nil, fmt.Errorf("%w: bundle version %d, this build reads 1 to %d", ErrBadBackup, v, bundleVersion)
	}
	n := binary.LittleEndian.Uint32(hdr[len(bundleMagic)+2:])
	if n == 0 || n > maxBundleShards {
		return nil, fmt.Errorf("%w: a bundle of %d shards", ErrBadBackup, n)
	}
	b := &Bundle{Version: int(v), Parts: make([]BundlePart, 0, n)}
	for i := range n {
		var l [8]byte
		if _, err := io.ReadFull(cr, l[:]); err != nil {
			return nil, fmt.Errorf("%w: truncated before shard %d", ErrBadBackup, i)
		}
		size := int64(binary.LittleEndian.Uint64(l[:]))
		start := cr.N
		info, err := VerifyBackup(io.LimitReader(cr, size))
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		if info.FileBytes != size || cr.N != start+size {
			return nil, fmt.Errorf("%w: shard %d's backup is not the %d bytes announced", ErrBadBackup, i, size)
		}
		b.Parts = append(b.Parts, BundlePart{Offset: start, Info: info})
	}
	if v >= bundleUsersVersion {
		var l [8]byte
		if _, err := io.ReadFull(cr, l[:]); err != nil {
			return nil, fmt.Errorf("%w: truncated before the cluster's users", ErrBadBackup)
		}
		size := binary.LittleEndian.Uint64(l[:])
		if size > MaxBundleUsers {
			return nil, fmt.Errorf("%w: the cluster's users announced as %d bytes, more than %d", ErrBadBackup, size, MaxBundleUsers)
		}
		sec := make([]byte, size)
		if _, err := io.ReadFull(cr, sec); err != nil {
			return nil, fmt.Errorf("%w: truncated in the cluster's users", ErrBadBackup)
		}
		count, err := fsm.CheckUsersSection(sec)
		if err != nil {
			return nil, fmt.Errorf("%w: the cluster's users: %v", ErrBadBackup, err)
		}
		b.HasUsers, b.Users, b.UserCount = true, sec, count
	}
	want := sum.Sum(nil)
	var got [sha256.Size]byte
	if _, err := io.ReadFull(cr.R, got[:]); err != nil || string(got[:]) != string(want) {
		return nil, fmt.Errorf("%w: the bundle's checksum does not match", ErrBadBackup)
	}
	if _, err := cr.R.Read(make([]byte, 1)); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the bundle's checksum", ErrBadBackup)
	}
	b.Size = cr.N + sha256.Size
	return b, nil
}
