package acl

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// TestMatchRedisCorpus checks Match against what Redis's own stringmatchlen
// (7.2.6, compiled from Redis's util.c) answered for each pattern and string
// of testdata/stringmatch.txt, with and without nocase: random and chosen
// patterns over the special bytes, bytes over 0x7f in ranges, unterminated
// sets, trailing backslashes.
func TestMatchRedisCorpus(t *testing.T) {
	f, err := os.Open("testdata/stringmatch.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var ph, sh, exact, nocase string
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("bad corpus line %q", line)
		}
		ph, sh, exact, nocase = fields[0][1:], fields[1][1:], fields[2], fields[3]
		p, err1 := hex.DecodeString(ph)
		s, err2 := hex.DecodeString(sh)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad corpus line %q", line)
		}
		if got := Match(p, s, false); got != (exact == "1") {
			t.Errorf("Match(%q, %q) = %v, Redis says %s", p, s, got, exact)
		}
		if got := Match(p, s, true); got != (nocase == "1") {
			t.Errorf("Match(%q, %q, nocase) = %v, Redis says %s", p, s, got, nocase)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 3000 {
		t.Fatalf("only %d corpus cases", n)
	}
}

// TestMatchRedisCases are Redis's own tests of KEYS patterns
// (tests/unit/keyspace.tcl) and the corners its code decides.
func TestMatchRedisCases(t *testing.T) {
	rep := func(s string, n int) string { return strings.Repeat(s, n) }
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"foo*", "foo_a", true},
		{"foo*", "key_x", false},
		{"*", "key_x", true},
		{"{a}*", "{a}x", true},
		{"{a}*", "{b}a", false},
		{"*{b}*", "{b}c", true},
		{"*{b}*", "{a}y", false},
		{"h?llo", "hello", true},
		{"h*llo", "hllo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{`h\*llo`, "h*llo", true},
		{`h\*llo`, "hello", false},
		// Redis's corners.
		{"*", "", false},  // a star alone never matches the empty string
		{"", "", true},    // but the empty pattern does
		{"[a", "a", true}, // an unterminated set runs to the end
		{`\`, `\`, true},  // a trailing backslash is itself
		{"[z-a]", "m", true},
		// Regressions for pattern matching long nested loops.
		{rep("a*", 20) + "b", rep("a", 40), false},
		{rep("*?", 1000), rep("a", 1000), true},
		{rep("*?", 1001), rep("a", 1001), false}, // past 1000 nested stars: no match
		{rep("*?", 50000), rep("a", 50000), false},
	} {
		if got := Match([]byte(c.pattern), []byte(c.s), false); got != c.want {
			p := c.pattern
			if len(p) > 40 {
				p = p[:40] + "..."
			}
			t.Errorf("Match(%q, %d bytes) = %v, want %v", p, len(c.s), got, c.want)
		}
	}
}

// TestCompiledGlobAgreesWithMatch checks the fast kinds against Match on
// random patterns and keys, and that each kind is chosen where meant.
func TestCompiledGlobAgreesWithMatch(t *testing.T) {
	for p, kind := range map[string]uint8{
		"*": globAny, "***": globAny, "": globExact, "app:1": globExact,
		"app:*": globPrefix, "app:**": globPrefix, "*:cache": globSuffix,
		"*mid*": globContains, "a*b": globGeneral, "a?": globGeneral, `\*`: globGeneral, "[ab]*": globGeneral,
	} {
		if g := compileGlob(p); g.kind != kind {
			t.Errorf("compileGlob(%q) kind %d, want %d", p, g.kind, kind)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pal := []string{"a", "b", ":", "*", "*", "?", "[", "]", `\`, "-"}
	sal := []string{"a", "b", ":", "*", "-"}
	gen := func(al []string, n int) string {
		var b strings.Builder
		for range rng.IntN(n) {
			b.WriteString(al[rng.IntN(len(al))])
		}
		return b.String()
	}
	for range 200000 {
		p, s := gen(pal, 7), gen(sal, 7)
		g := compileGlob(p)
		if got, want := g.match([]byte(s)), Match([]byte(p), []byte(s), false); got != want {
			t.Fatalf("compiled %q (kind %d) on %q = %v, Match says %v", p, g.kind, s, got, want)
		}
	}
}

// FuzzMatch runs Match on anything: it never panics, and the compiled
// pattern agrees with it.
func FuzzMatch(f *testing.F) {
	f.Add([]byte("app:*"), []byte("app:1"))
	f.Add([]byte("[^a-"), []byte("b"))
	f.Add([]byte(`*\`), []byte(`x\`))
	f.Fuzz(func(t *testing.T, p, s []byte) {
		want := Match(p, s, false)
		Match(p, s, true)
		g := compileGlob(string(p))
		if got := g.match(s); got != want {
			t.Fatalf("compiled %q on %q = %v, Match says %v", p, s, got, want)
		}
		if bytes.Equal(p, s) && !bytes.ContainsAny(p, `*?[\`) && !want {
			t.Fatalf("%q does not match itself", p)
		}
	})
}
