package acl

import (
	"crypto/sha256"
	"encoding/binary"
	"sort"
	"strings"

	"github.com/rookerydb/rookery/internal/wire"
)

// EncodingVersion is the version byte Encode writes first. A new version
// gets a new number; Decode reads every older one.
const EncodingVersion = 1

// User flags in the encoding. Bits are only ever added.
const (
	encEnabled = 1 << iota
	encNoPass
	encSkipSanitize
	encAllKeys
	encAllChannels
	encAllCommands
	encKnownFlags = 1<<iota - 1
)

// Encode writes users deterministically: the same users give the same
// bytes on every node, whatever order they come in or when they were
// compiled (users sorted by name; passwords, patterns, channels and rules
// in the order the rules left them). It is the users' part of a snapshot,
// and what a log entry carries when it sets the whole user set (an aclfile
// at bootstrap). Passwords are written as SHA-256 digests only.
//
// Version 1:
//
//	version byte (1)
//	uvarint count, then per user, by name:
//	  string name
//	  byte flags (encEnabled...)
//	  uvarint count, then 32-byte password digests
//	  uvarint count, then per key pattern: byte access (1 R, 2 W, 3 RW), string pattern
//	  uvarint count, then strings: channel patterns
//	  uvarint count, then strings: command rules ("+@read", "-bf.add")
//
// A string is a uvarint length and its bytes.
func Encode(users []*User) []byte {
	us := append([]*User(nil), users...)
	sort.Slice(us, func(i, j int) bool { return us[i].name < us[j].name })
	b := []byte{EncodingVersion}
	b = binary.AppendUvarint(b, uint64(len(us)))
	for _, u := range us {
		b = appendString(b, u.name)
		var f byte
		for _, x := range []struct {
			on  bool
			bit byte
		}{
			{u.enabled, encEnabled}, {u.nopass, encNoPass}, {u.skipSanitize, encSkipSanitize},
			{u.allKeys, encAllKeys}, {u.allChannels, encAllChannels}, {u.allCommands, encAllCommands},
		} {
			if x.on {
				f |= x.bit
			}
		}
		b = append(b, f)
		b = binary.AppendUvarint(b, uint64(len(u.passwords)))
		for _, p := range u.passwords {
			b = append(b, p[:]...)
		}
		b = binary.AppendUvarint(b, uint64(len(u.keys)))
		for _, k := range u.keys {
			b = append(b, byte(k.access))
			b = appendString(b, k.pattern)
		}
		b = appendStrings(b, u.channels)
		b = appendStrings(b, u.rules)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// Decode reads what Encode wrote. It fails, without panicking, on any
// input Encode could not have written (ErrCorrupt: names out of order, a
// pattern with a space, rules no SETUSER would leave, trailing bytes...)
// or of a newer version (ErrVersion), so that a damaged snapshot is never
// half loaded. The users are not compiled: Store.Replace compiles them.
func Decode(data []byte) ([]*User, error) {
	r := wire.NewReader(data, ErrCorrupt)
	switch v := r.Byte(); {
	case r.Err() != nil:
		return nil, r.Err()
	case v == 0:
		r.Fail("version 0")
		return nil, r.Err()
	case v > EncodingVersion:
		return nil, ErrVersion
	}
	n := r.Count()
	var users []*User
	for i := 0; i < n && r.Err() == nil; i++ {
		u := decodeUser(r)
		if r.Err() == nil && len(users) > 0 && users[len(users)-1].name >= u.name {
			r.Fail("users out of order")
		}
		users = append(users, u)
	}
	if r.Err() == nil && len(r.B) > 0 {
		r.Fail("bytes after the users")
	}
	if r.Err() != nil {
		return nil, r.Err()
	}
	return users, nil
}

func decodeUser(r *wire.Reader) *User {
	u := &User{name: string(r.Bytes(r.Count()))}
	if !ValidUsername(u.name) {
		r.Fail("user name with a space")
	}
	f := r.Byte()
	if f&^encKnownFlags != 0 {
		r.Fail("unknown user flags")
	}
	u.enabled, u.nopass, u.skipSanitize = f&encEnabled != 0, f&encNoPass != 0, f&encSkipSanitize != 0
	u.allKeys, u.allChannels, u.allCommands = f&encAllKeys != 0, f&encAllChannels != 0, f&encAllCommands != 0

	seen := map[string]bool{}
	for range r.Count() {
		h := string(r.Bytes(sha256.Size))
		if r.Err() != nil {
			break
		}
		if seen[h] {
			r.Fail("a password twice")
		}
		seen[h] = true
		u.passwords = append(u.passwords, [sha256.Size]byte([]byte(h)))
	}
	clear(seen)
	for range r.Count() {
		a := Access(r.Byte())
		p := string(r.Bytes(r.Count()))
		if r.Err() != nil {
			break
		}
		if a == 0 || a&^(KeyRead|KeyWrite) != 0 || hasSpace(p) || seen[p] {
			r.Fail("bad key pattern")
		}
		seen[p] = true
		u.keys = append(u.keys, keyPattern{pattern: p, access: a})
	}
	clear(seen)
	for range r.Count() {
		c := string(r.Bytes(r.Count()))
		if r.Err() != nil {
			break
		}
		if hasSpace(c) || seen[c] {
			r.Fail("bad channel pattern")
		}
		seen[c] = true
		u.channels = append(u.channels, c)
	}
	for range r.Count() {
		rule := string(r.Bytes(r.Count()))
		if r.Err() != nil {
			break
		}
		if !canonicalRule(rule) {
			r.Fail("bad command rule")
		}
		u.rules = append(u.rules, rule)
	}
	switch {
	case r.Err() != nil:
	case u.nopass && len(u.passwords) > 0:
		r.Fail("passwords with nopass")
	case u.allKeys && len(u.keys) > 0:
		r.Fail("key patterns with allkeys")
	case u.allChannels && len(u.channels) > 0:
		r.Fail("channel patterns with allchannels")
	case !keptRules(u.rules):
		r.Fail("command rules SETUSER would not leave")
	}
	return u
}

// keptRules reports whether rules are a list keepRule leaves: no rule
// followed by another on the same name, or on its container. Checked from
// the end, in one pass.
func keptRules(rules []string) bool {
	later := make(map[string]bool, len(rules))
	for i := len(rules) - 1; i >= 0; i-- {
		name := rules[i][1:]
		base, _, _ := strings.Cut(name, "|")
		if later[name] || later[base] {
			return false
		}
		later[name] = true
	}
	return true
}

// canonicalRule reports whether rule is one a user keeps: + or -, then a
// lower-case category (not all), command, or container|sub.
func canonicalRule(rule string) bool {
	if len(rule) < 2 || (rule[0] != '+' && rule[0] != '-') || strings.ToLower(rule) != rule {
		return false
	}
	name := rule[1:]
	if cat, ok := strings.CutPrefix(name, "@"); ok {
		return validName(cat) && cat != "all"
	}
	base, sub, hasSub := strings.Cut(name, "|")
	return validName(base) && (!hasSub || validName(sub))
}
