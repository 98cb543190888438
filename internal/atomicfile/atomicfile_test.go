package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWholeAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for _, content := range []string{"first\n", "second, longer than the first\n", "3\n"} {
		if err := Write(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the file: %v", len(entries), entries)
	}
}

func TestWriteFailsWithoutDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	if err := Write(path, []byte("x"), 0o644); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

// TestWriteFromKeepsTheOldFileWhenFillFails: a stream that fails part way
// leaves the file as it was and no temporary, and its error comes back as it
// was given.
func TestWriteFromKeepsTheOldFileWhenFillFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "backup")
	if err := Write(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := errors.New("the backup failed its checks")
	err := WriteFrom(path, 0o600, func(w io.Writer) error {
		w.Write([]byte("half a new"))
		return bad
	})
	if !errors.Is(err, bad) || err.Error() != bad.Error() {
		t.Fatalf("WriteFrom returned %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the directory holds %d entries", len(ents))
	}
	if err := WriteFrom(path, 0o600, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("the file holds %q", b)
	}
}
