package transport

import (
	"strings"
	"testing"
)

// Issue 9, part 5: a filter that cannot be built is refused while the request is
// parsed, with the bytes it would need, and takes no log entry. Measured on the
// build before, CBF.RESERVE x 1e-300 1073741824 was proposed, applied on every
// replica, and only then answered "ERR could not create filter".

const tooLargeCounting = "ERR could not create filter: the filter would need 771890854896 bytes, more than the maximum of 68719476736"

// TestParseRefusesUnbuildableFilter: every command that creates a filter from
// parameters the client chose checks them before anything is proposed.
func TestParseRefusesUnbuildableFilter(t *testing.T) {
	s := mustNewParser(t, Config{MaxCapacity: 1 << 62})
	cases := []struct{ line, want string }{
		{"CBF.RESERVE x 1e-300 1073741824", tooLargeCounting},
		{"CBF.RESERVE x 1e-300 1073741824 LAYOUT dleft", "ERR could not create filter: the filter would need "},
		{"CBF.RESERVE x 1e-300 1073741824 COUNTERBITS 8", "ERR could not create filter: the filter would need "},
		{"BF.RESERVE x 1e-300 1073741824", "ERR could not create filter: the filter would need "},
		{"BF.RESERVE x 0.01 4611686018427387904", "ERR could not create filter: capacity 4611686018427387904 out of range"},
		{"BF.INSERT x ERROR 1e-300 CAPACITY 1073741824 ITEMS a", "ERR could not create filter: the filter would need "},
		{"CF.RESERVE x 4611686018427387904", "ERR could not create filter: the filter would need "},
		{"CF.RESERVE x 4611686018427387904 BUCKETSIZE 255 EXPANSION 32768", "ERR could not create filter: the filter would need "},
		{"CF.INSERT x CAPACITY 4611686018427387904 ITEMS a", "ERR could not create filter: the filter would need "},
	}
	for _, c := range cases {
		_, err := parseLine(s, c.line)
		if err == nil {
			t.Errorf("%s: parsed, want %q", c.line, c.want)
			continue
		}
		if got := renderErr(err); !strings.HasPrefix(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%s:\n got %q\nwant %q...", c.line, got, c.want)
		}
	}
	// What can be built still parses, at the largest capacity clients may ask
	// for; options that only matter at creation are not checked with NOCREATE.
	for _, line := range []string{
		"CBF.RESERVE x 0.01 1073741824",
		"CBF.RESERVE x 0.000001 1073741824 LAYOUT dleft",
		"BF.RESERVE x 1e-10 1073741824",
		"CF.RESERVE x 1073741824 BUCKETSIZE 255",
		"BF.INSERT x ERROR 1e-300 CAPACITY 1073741824 NOCREATE ITEMS a",
		"CF.INSERT x CAPACITY 4611686018427387904 NOCREATE ITEMS a",
	} {
		if _, err := parseLine(s, line); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}

// TestServerRefusesUnbuildableFilterBeforeTheLog: through a connection, the
// error reaches the client and the backend is never asked to propose.
func TestServerRefusesUnbuildableFilterBeforeTheLog(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	if got := c.do("CBF.RESERVE", "x", "1e-300", "1073741824"); got != "-"+tooLargeCounting+"\r\n" {
		t.Fatalf("got %q", got)
	}
	if got := c.do("BF.RESERVE", "x", "1e-300", "1073741824"); !strings.HasPrefix(got, "-ERR could not create filter: ") {
		t.Fatalf("got %q", got)
	}
	if n := len(ts.be.submitted()); n != 0 {
		t.Fatalf("%d writes proposed for filters that cannot be built", n)
	}
	if got := c.do("CBF.RESERVE", "x", "0.01", "1000"); got != "+OK\r\n" {
		t.Fatalf("a filter that can be built: %q", got)
	}
}
