package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// Apply applies ACL SETUSER rules to a copy of u, left to right, all or
// nothing: it returns the new user, or a *SetUserError naming the first rule
// that failed and changes nothing. The rules are Redis's: on, off, >pass,
// <pass, #hash, !hash, nopass, resetpass, ~pattern, %R~pattern, %W~pattern,
// %RW~pattern, allkeys, resetkeys, &pattern, allchannels, resetchannels,
// +cmd, -cmd, +cmd|sub, -cmd|sub, +@category, -@category, allcommands,
// nocommands, reset, clearselectors, sanitize-payload and
// skip-sanitize-payload (the last two kept and shown, with nothing here to
// act on them). Selectors, "(...)", are refused, as Redis 6 refused them.
//
// With a registry, a rule must name a command or category that reg knows,
// as a client's ACL SETUSER is checked. With none, names are checked for
// their form only: that is how the state machine applies rules from the
// log, so that every replica reaches the same user whatever commands its
// build has (doc.go). The result is not compiled.
func (u *User) Apply(rules []string, reg *Registry) (*User, error) {
	n := u.clone()
	for i, r := range rules {
		if msg := n.applyRule(r, reg); msg != "" {
			return nil, &SetUserError{Index: i, Rule: r, Reason: msg}
		}
	}
	return n, nil
}

// applyRule applies one rule to u in place and returns why it failed, or "".
// The order of the tests is Redis's (ACLSetUser, then ACLSetSelector).
func (u *User) applyRule(op string, reg *Registry) string {
	is := func(w string) bool { return strings.EqualFold(op, w) }
	switch {
	case op == "":
		// An empty rule changes nothing, as in Redis.
	case is("on"):
		u.enabled = true
	case is("off"):
		u.enabled = false
	case is("skip-sanitize-payload"):
		u.skipSanitize = true
	case is("sanitize-payload"):
		u.skipSanitize = false
	case is("nopass"):
		u.nopass, u.passwords = true, nil
	case is("resetpass"):
		u.nopass, u.passwords = false, nil
	case op[0] == '>' || op[0] == '#':
		h, ok := ruleHash(op)
		if !ok {
			return msgBadHash
		}
		if !slices.Contains(u.passwords, h) {
			u.passwords = append(u.passwords, h)
		}
		u.nopass = false
	case op[0] == '<' || op[0] == '!':
		h, ok := ruleHash(op)
		if !ok {
			return msgBadHash
		}
		i := slices.Index(u.passwords, h)
		if i < 0 {
			return msgNoSuchPass
		}
		u.passwords = slices.Delete(u.passwords, i, i+1)
	case op[0] == '(':
		return msgSyntax // a selector: not supported
	case is("clearselectors"):
		// There are never selectors to clear.
	case is("reset"):
		u.nopass, u.passwords = false, nil
		u.allKeys, u.keys = false, nil
		u.allChannels, u.channels = false, nil
		u.enabled, u.skipSanitize = false, false
		u.allCommands, u.rules = false, nil
	default:
		return u.applySelectorRule(op, reg)
	}
	return ""
}

// applySelectorRule applies a rule on keys, channels or commands.
func (u *User) applySelectorRule(op string, reg *Registry) string {
	is := func(w string) bool { return strings.EqualFold(op, w) }
	switch {
	case is("allkeys") || op == "~*":
		u.allKeys, u.keys = true, nil
	case is("resetkeys"):
		u.allKeys, u.keys = false, nil
	case is("allchannels") || op == "&*":
		u.allChannels, u.channels = true, nil
	case is("resetchannels"):
		u.allChannels, u.channels = false, nil
	case is("allcommands") || is("+@all"):
		u.allCommands, u.rules = true, nil
	case is("nocommands") || is("-@all"):
		u.allCommands, u.rules = false, nil
	case op[0] == '~' || op[0] == '%':
		return u.addKeyPattern(op)
	case op[0] == '&':
		if u.allChannels {
			return msgChansAfterAll
		}
		if hasSpace(op[1:]) {
			return msgSyntax
		}
		if !slices.Contains(u.channels, op[1:]) {
			u.channels = append(u.channels, op[1:])
		}
	case (op[0] == '+' || op[0] == '-') && strings.HasPrefix(op[1:], "@"):
		return u.addCategoryRule(op, reg)
	case op[0] == '+':
		return u.allowCommand(op[1:], reg)
	case op[0] == '-':
		return u.denyCommand(op[1:], reg)
	default:
		return msgSyntax
	}
	return ""
}

// addKeyPattern applies ~pattern or %<R|W|RW>~pattern. A pattern given
// again gains the new access rather than being listed twice.
func (u *User) addKeyPattern(op string) string {
	if u.allKeys {
		return msgKeysAfterAll
	}
	access, off := KeyRead|KeyWrite, 1
	if op[0] == '%' {
		access = 0
		tilde := false
		for ; off < len(op) && !tilde; off++ {
			switch {
			case (op[off] == 'R' || op[off] == 'r') && access&KeyRead == 0:
				access |= KeyRead
			case (op[off] == 'W' || op[off] == 'w') && access&KeyWrite == 0:
				access |= KeyWrite
			case op[off] == '~' && access != 0:
				tilde = true
			default:
				return msgSyntax
			}
		}
		// Redis takes "%R" with no '~' for an empty pattern; that is
		// surely a mistake, refused here.
		if !tilde {
			return msgSyntax
		}
	}
	pat := op[off:]
	if hasSpace(pat) {
		return msgSyntax
	}
	for i := range u.keys {
		if u.keys[i].pattern == pat {
			u.keys[i].access |= access
			return ""
		}
	}
	u.keys = append(u.keys, keyPattern{pattern: pat, access: access})
	return ""
}

// addCategoryRule applies +@category or -@category.
func (u *User) addCategoryRule(op string, reg *Registry) string {
	name := op[2:]
	if reg != nil {
		if _, ok := CategoryByName(name); !ok {
			return msgUnknown
		}
	} else if !validName(name) {
		return msgUnknown
	}
	u.keepRule(op[:1] + "@" + strings.ToLower(name))
	return ""
}

// allowCommand applies +cmd or +container|sub.
func (u *User) allowCommand(name string, reg *Registry) string {
	i := strings.LastIndexByte(name, '|')
	if i < 0 {
		if reg != nil {
			id, ok := reg.lookupFold(name)
			if !ok {
				return msgUnknown
			}
			name = reg.names[id]
		} else if !validName(name) {
			return msgUnknown
		}
		u.keepRule("+" + strings.ToLower(name))
		return ""
	}
	base, sub := name[:i], name[i+1:]
	if reg != nil {
		id, ok := lookupCommand(reg, base)
		switch {
		case !ok:
			return msgUnknown
		case reg.parent[id] >= 0:
			return msgSubFirstArg
		case sub == "":
			return msgSyntax
		case !reg.isContainer(id):
			return msgFirstArg
		}
		if _, ok := reg.lookupFold(name); !ok {
			return msgUnknown
		}
	} else {
		switch {
		case strings.Contains(base, "|"):
			return msgSubFirstArg
		case !validName(base):
			return msgUnknown
		case sub == "" || !validName(sub):
			return msgSyntax
		}
	}
	u.keepRule("+" + strings.ToLower(name))
	return ""
}

// denyCommand applies -cmd or -container|sub.
func (u *User) denyCommand(name string, reg *Registry) string {
	if reg != nil {
		id, ok := lookupCommand(reg, name)
		if !ok {
			return msgUnknown
		}
		name = reg.names[id]
	} else {
		base, sub, hasSub := strings.Cut(name, "|")
		if !validName(base) || (hasSub && !validName(sub)) {
			return msgUnknown
		}
	}
	u.keepRule("-" + strings.ToLower(name))
	return ""
}

// lookupCommand finds "cmd" or "container|sub" as Redis's
// lookupCommandBySdsLogic does: one level of subcommand at most, and
// "cmd|x" is nothing when cmd has no subcommands.
func lookupCommand(reg *Registry, name string) (int, bool) {
	base, sub, hasSub := strings.Cut(name, "|")
	id, ok := reg.lookupFold(base)
	if !ok || !hasSub {
		return id, ok
	}
	if strings.Contains(sub, "|") || !reg.isContainer(id) {
		return 0, false
	}
	return reg.lookupFold(name)
}

// keepRule records a command rule as Redis's ACLUpdateCommandRules does:
// an earlier rule on the same command or category goes, and so do the
// earlier rules on a command's subcommands, then the new rule is appended.
// rule is lower case.
func (u *User) keepRule(rule string) {
	name := rule[1:]
	u.rules = slices.DeleteFunc(u.rules, func(r string) bool {
		old := r[1:]
		return old == name || (strings.HasPrefix(old, name) && old[len(name)] == '|')
	})
	u.rules = append(u.rules, rule)
}

// validName reports whether a command, subcommand or category name has a
// form a rule may carry: not empty, and neither a space nor '|' nor '@'.
func validName(s string) bool {
	return s != "" && !hasSpace(s) && !strings.ContainsAny(s, "|@")
}

// hasSpace reports whether s holds a byte C's isspace accepts, or a NUL:
// Redis refuses those in user names and patterns.
func hasSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return true
		}
	}
	return false
}

// ruleHash is the digest a password rule names: hashed from >pass and
// <pass, read from #hash and !hash (64 lower-case hex digits).
func ruleHash(op string) ([sha256.Size]byte, bool) {
	if op[0] == '>' || op[0] == '<' {
		return sha256.Sum256([]byte(op[1:])), true
	}
	return parseHash(op[1:])
}

// parseHash reads a password digest as Redis accepts one: exactly 64
// characters of 0-9 and a-f.
func parseHash(s string) ([sha256.Size]byte, bool) {
	var h [sha256.Size]byte
	if len(s) != 2*sha256.Size {
		return h, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return h, false
		}
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err == nil
}

// HashPassword is the SHA-256 digest of pass in hex, as Redis stores
// passwords and ACL GETUSER shows them.
func HashPassword(pass string) string {
	h := sha256.Sum256([]byte(pass))
	return hex.EncodeToString(h[:])
}

// HashRules returns rules with every clear-text password replaced by its
// digest: >pass becomes #hash and <pass becomes !hash, which do the same
// thing. What goes into the log passes through it, so no password is ever
// written down. The rules keep their positions, so a *SetUserError's Index
// points at the rule the client sent.
func HashRules(rules []string) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		switch {
		case strings.HasPrefix(r, ">"):
			out[i] = "#" + HashPassword(r[1:])
		case strings.HasPrefix(r, "<"):
			out[i] = "!" + HashPassword(r[1:])
		default:
			out[i] = r
		}
	}
	return out
}

// ValidUsername reports whether name may name a user: no spaces, no NUL
// (ErrBadUsername otherwise). Redis allows the empty name; so does this.
func ValidUsername(name string) bool { return !hasSpace(name) }
