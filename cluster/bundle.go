package cluster

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/rookerydb/rookery/internal/wire"
)

// A backup of a sharded cluster is a bundle: one backup file per shard, in
// shard order, each as the shard's leader sends it (backup.go), in a file
// that describes itself:
//
//	"RKYBUNDL"   magic
//	uint16       format version (1), little endian as the rest
//	uint32       the number of shards, n
//	n times:     uint64 length L, then L bytes: the shard's backup file
//	32 bytes     SHA-256 of everything above
//
// rookery snapshot save writes one by asking each shard's leader for its
// backup; restore sends each part to the leader of the same shard of a
// cluster with as many shards. Each part verifies itself (VerifyBackup), and
// the trailing SHA-256 catches a damaged, truncated or extended bundle.

const (
	bundleMagic   = "RKYBUNDL"
	bundleVersion = 1
	// maxBundleShards bounds the shard count read from a file.
	maxBundleShards = 16384
)

// IsBundle reports whether a file starting with head is a bundle.
func IsBundle(head []byte) bool {
	return len(head) >= len(bundleMagic) && string(head[:len(bundleMagic)]) == bundleMagic
}

// BundleWriter writes a bundle: Begin, then Part for each shard in order,
// then Close.
type BundleWriter struct {
	w     io.Writer
	sum   hash.Hash
	parts int
	want  int
}

// NewBundleWriter starts a bundle of shards parts on w.
func NewBundleWriter(w io.Writer, shards int) (*BundleWriter, error) {
	b := &BundleWriter{sum: sha256.New(), want: shards}
	b.w = io.MultiWriter(w, b.sum)
	hdr := append([]byte(bundleMagic), 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint16(hdr[len(bundleMagic):], bundleVersion)
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

// Close writes the trailing checksum.
func (b *BundleWriter) Close() error {
	if b.parts != b.want {
		return fmt.Errorf("bundle: %d of %d parts written", b.parts, b.want)
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

// VerifyBundle reads a whole bundle from r, verifying every part and the
// trailing checksum, and describes it.
func VerifyBundle(r io.Reader) ([]BundlePart, int64, error) {
	sum := sha256.New()
	cr := &wire.CountReader{R: io.TeeReader(r, sum)}
	hdr := make([]byte, len(bundleMagic)+6)
	if _, err := io.ReadFull(cr, hdr); err != nil || !IsBundle(hdr) {
		return nil, 0, fmt.Errorf("%w: not a bundle of shard backups", ErrBadBackup)
	}
	if v := binary.LittleEndian.Uint16(hdr[len(bundleMagic):]); v != bundleVersion {
		return nil, 0, fmt.Errorf("%w: bundle version %d, this build reads %d", ErrBadBackup, v, bundleVersion)
	}
	n := binary.LittleEndian.Uint32(hdr[len(bundleMagic)+2:])
	if n == 0 || n > maxBundleShards {
		return nil, 0, fmt.Errorf("%w: a bundle of %d shards", ErrBadBackup, n)
	}
	parts := make([]BundlePart, 0, n)
	for i := range n {
		var l [8]byte
		if _, err := io.ReadFull(cr, l[:]); err != nil {
			return nil, 0, fmt.Errorf("%w: truncated before shard %d", ErrBadBackup, i)
		}
		size := int64(binary.LittleEndian.Uint64(l[:]))
		start := cr.N
		info, err := VerifyBackup(io.LimitReader(cr, size))
		if err != nil {
			return nil, 0, fmt.Errorf("shard %d: %w", i, err)
		}
		if info.FileBytes != size || cr.N != start+size {
			return nil, 0, fmt.Errorf("%w: shard %d's backup is not the %d bytes announced", ErrBadBackup, i, size)
		}
		parts = append(parts, BundlePart{Offset: start, Info: info})
	}
	want := sum.Sum(nil)
	var got [sha256.Size]byte
	if _, err := io.ReadFull(cr.R, got[:]); err != nil || string(got[:]) != string(want) {
		return nil, 0, fmt.Errorf("%w: the bundle's checksum does not match", ErrBadBackup)
	}
	if _, err := cr.R.Read(make([]byte, 1)); err != io.EOF {
		return nil, 0, fmt.Errorf("%w: data after the bundle's checksum", ErrBadBackup)
	}
	return parts, cr.N + sha256.Size, nil
}
