package acl

import "bytes"

// maxGlobNesting is how deep a match may recurse, one level per '*' it has
// passed: Redis gives up (no match) past 1000 (CVE-2024-31228, 7.2.6).
const maxGlobNesting = 1000

// Match reports whether s matches the glob pattern as Redis's stringmatchlen
// decides it: '*' any run of bytes, '?' any byte, "[abc]", "[^abc]" and
// "[a-z]" sets (a reversed range counts, an unterminated set runs to the end
// of the pattern), '\' makes the next byte literal, and everything else
// matches itself (ignoring ASCII case with nocase, except escaped bytes in a
// set). Redis's corners are kept: "*" does not match the empty string, and a
// match needing more than 1000 nested stars fails.
func Match(pattern, s []byte, nocase bool) bool {
	skip := false
	return matchGlob(pattern, s, nocase, &skip, 0)
}

// matchGlob follows stringmatchlen_impl step by step. skip is set once the
// rest of the pattern after some '*' was found to match nowhere in the rest
// of the string: then no earlier '*' can help by matching more.
func matchGlob(p, s []byte, nocase bool, skip *bool, nesting int) bool {
	if nesting > maxGlobNesting {
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if matchGlob(p[1:], s, nocase, skip, nesting+1) {
					return true
				}
				if *skip {
					return false
				}
				s = s[1:]
			}
			*skip = true
			return false
		case '?':
			p = p[1:]
		case '[':
			var in bool
			if p, in = matchClass(p[1:], s[0], nocase); !in {
				return false
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if !sameByte(p[0], s[0], nocase) {
				return false
			}
			p = p[1:]
		}
		s = s[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
		}
	}
	return len(p) == 0 && len(s) == 0
}

// matchClass matches c against the set whose body starts p (just past the
// '[') and returns the pattern after the set and whether c is in it. A set
// with no ']' takes the rest of the pattern.
func matchClass(p []byte, c byte, nocase bool) ([]byte, bool) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	in := false
	for {
		switch {
		case len(p) == 0:
			return p, in != not
		case p[0] == '\\' && len(p) >= 2:
			p = p[1:]
			in = in || p[0] == c
		case p[0] == ']':
			return p[1:], in != not
		case len(p) >= 3 && p[1] == '-':
			// C compares chars, signed where Redis runs, so a byte over
			// 0x7f sorts below the ASCII ones; then glibc's tolower maps
			// those back to their unsigned values, but for 0xff (EOF).
			lo, hi, x := int(int8(p[0])), int(int8(p[2])), int(int8(c))
			if lo > hi {
				lo, hi = hi, lo
			}
			if nocase {
				lo, hi, x = ctolower(lo), ctolower(hi), ctolower(x)
			}
			p = p[2:]
			in = in || (x >= lo && x <= hi)
		default:
			in = in || sameByte(p[0], c, nocase)
		}
		p = p[1:]
	}
}

// ctolower is glibc's tolower in the C locale on a char's signed value.
func ctolower(v int) int {
	switch {
	case v == -1: // EOF
		return v
	case v < 0:
		return v + 256
	case 'A' <= v && v <= 'Z':
		return v + 'a' - 'A'
	}
	return v
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func sameByte(a, b byte, nocase bool) bool {
	if nocase {
		return lower(a) == lower(b)
	}
	return a == b
}

// Pattern kinds: most key patterns are a literal, a prefix ("tenant:*"), a
// suffix or "*"; those are matched without the general matcher.
const (
	globAny      uint8 = iota // only stars: any non-empty key
	globExact                 // no special byte
	globPrefix                // literal then stars
	globSuffix                // stars then literal
	globContains              // stars, literal, stars
	globGeneral
)

// glob is a compiled key pattern.
type glob struct {
	kind    uint8
	lit     []byte // the literal of the fast kinds
	pattern []byte // the whole pattern, for globGeneral
}

// compileGlob classifies pattern. Every fast kind answers exactly what Match
// answers (TestCompiledGlobAgreesWithMatch): a star also matches the empty
// run, but Redis's "*" alone never matches an empty key, and no fast kind
// with a literal can see one.
func compileGlob(pattern string) glob {
	p := []byte(pattern)
	lead := 0
	for lead < len(p) && p[lead] == '*' {
		lead++
	}
	trail := len(p)
	for trail > lead && p[trail-1] == '*' {
		trail--
	}
	lit := p[lead:trail]
	if bytes.ContainsAny(lit, `*?[\`) {
		return glob{kind: globGeneral, pattern: p}
	}
	switch {
	case lead == len(p) && len(p) > 0:
		return glob{kind: globAny}
	case lead == 0 && trail == len(p):
		return glob{kind: globExact, lit: lit}
	case lead == 0:
		return glob{kind: globPrefix, lit: lit}
	case trail == len(p):
		return glob{kind: globSuffix, lit: lit}
	default:
		return glob{kind: globContains, lit: lit}
	}
}

// match reports whether key matches, case-sensitively as ACL patterns do.
func (g *glob) match(key []byte) bool {
	switch g.kind {
	case globAny:
		return len(key) > 0
	case globExact:
		return bytes.Equal(key, g.lit)
	case globPrefix:
		return bytes.HasPrefix(key, g.lit)
	case globSuffix:
		return bytes.HasSuffix(key, g.lit)
	case globContains:
		return bytes.Contains(key, g.lit)
	}
	return Match(g.pattern, key, false)
}
