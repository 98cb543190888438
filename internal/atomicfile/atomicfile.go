// Package atomicfile replaces small files whole or not at all: the data goes to
// a temporary file in the same directory, which is fsynced, renamed over the
// target and followed by an fsync of the directory, so that a crash at any
// moment leaves the old file or the new one, never a torn one. The node's
// identity, its members file, the rejoin marker, certificates and the backups
// `rookery snapshot save` writes use it.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with b, created with mode perm.
func Write(path string, b []byte, perm os.FileMode) error {
	err := WriteFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	var fe fillError
	if errors.As(err, &fe) {
		return fmt.Errorf("write %s: %w", path, fe.err)
	}
	return err
}

// fillError marks an error of WriteFrom's fill, which it returns as it is.
type fillError struct{ err error }

func (e fillError) Error() string { return e.err.Error() }
func (e fillError) Unwrap() error { return e.err }

// WriteFrom replaces path with what fill writes (a stream of any length),
// created with mode perm. When fill fails, path is left as it was and fill's
// error is returned unchanged (errors.Is and its text as fill gave them).
func WriteFrom(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = tmp.Chmod(perm)
	if err == nil {
		if ferr := fill(tmp); ferr != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return fillError{ferr}
		}
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}
