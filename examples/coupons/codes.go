package main

import (
	"crypto/rand"
	"strings"
)

// A code is twelve symbols of a 32-letter alphabet without 0, O, 1 and I, in
// groups of four: 7KQM-X3PF-92HD. Sixty random bits: guessing one of a
// million issued codes takes about 10^12 tries, and each try that the filter
// cannot turn away costs a store lookup, which is what the service counts.
const (
	alphabet   = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
	codeGroups = 3
	groupLen   = 4
	codeLen    = codeGroups*groupLen + codeGroups - 1
)

// newCodes draws n codes from crypto/rand.
func newCodes(n int) []string {
	raw := make([]byte, n*codeGroups*groupLen)
	_, _ = rand.Read(raw) // never fails (crypto/rand's documentation)
	codes := make([]string, n)
	var b strings.Builder
	for i := range codes {
		b.Reset()
		for j, x := range raw[i*codeGroups*groupLen : (i+1)*codeGroups*groupLen] {
			if j > 0 && j%groupLen == 0 {
				b.WriteByte('-')
			}
			b.WriteByte(alphabet[x%32]) // 256 is a multiple of 32: unbiased
		}
		codes[i] = b.String()
	}
	return codes
}

// normalizeCode returns s as a code (upper case accepted as typed in lower
// case), or false if s cannot be one.
func normalizeCode(s string) (string, bool) {
	if len(s) != codeLen {
		return "", false
	}
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
			b[i] = c
		}
		if (i+1)%(groupLen+1) == 0 {
			if c != '-' {
				return "", false
			}
		} else if strings.IndexByte(alphabet, c) < 0 {
			return "", false
		}
	}
	return string(b), true
}

// validCampaign: 1 to 64 letters, digits, '-' or '_'.
func validCampaign(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
