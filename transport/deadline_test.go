package transport

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// literalTime matches integer literals long enough to be a Unix time in
// seconds (10 digits), milliseconds (13), microseconds (16) or nanoseconds
// (19), with or without digit separators.
var literalTime = regexp.MustCompile(`\b[1-9][0-9_]{9,22}\b`)

// TestNoLiteralDeadlinesAhead fails when a test of transport/ or fsm/ writes a
// Unix time that falls within the next ten years as a literal: such a test
// passes today and breaks on the day the literal passes, as one did on
// 2026-11-26. Deadlines in tests derive from time.Now(); a literal that no
// clock reads (a codec value pinned by a golden file) says so with a
// "codec value" comment on its line.
func TestNoLiteralDeadlinesAhead(t *testing.T) {
	now := time.Now()
	horizon := now.AddDate(10, 0, 0)
	for _, dir := range []string{".", filepath.Join("..", "fsm")} {
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "codec value") {
					continue
				}
				for _, lit := range literalTime.FindAllString(line, -1) {
					if at, ok := asUnixTime(lit); ok && at.After(now) && at.Before(horizon) {
						t.Errorf("%s:%d: %s is %s, a date within ten years: derive it from time.Now()", f, i+1, lit, at.UTC().Format(time.RFC3339))
					}
				}
			}
		}
	}
}

// asUnixTime reads a literal as a Unix time in the unit its digit count
// suggests.
func asUnixTime(lit string) (time.Time, bool) {
	digits := strings.ReplaceAll(lit, "_", "")
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	switch len(digits) {
	case 10:
		return time.Unix(n, 0), true
	case 13:
		return time.UnixMilli(n), true
	case 16:
		return time.UnixMicro(n), true
	case 19:
		return time.Unix(0, n), true
	}
	return time.Time{}, false
}

// TestAsUnixTimeSeesLiteralDeadlines: the check above would have caught the
// literal that broke the build.
func TestAsUnixTimeSeesLiteralDeadlines(t *testing.T) {
	before := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for _, lit := range []string{"1795651200", "1795651200499", "1795651200_000", "1795651200000000", "1795651200000000000"} {
		at, ok := asUnixTime(lit)
		if !ok || !at.After(before) || at.After(before.AddDate(0, 0, 2)) {
			t.Errorf("%s read as %v %v, want 2026-11-26", lit, at, ok)
		}
	}
	if !literalTime.MatchString("Expire: 1795651200_000,") {
		t.Error("a literal with digit separators is not seen")
	}
}
