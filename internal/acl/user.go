package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

// DefaultUser is the user every connection starts as.
const DefaultUser = "default"

// User is one user: the state ACL SETUSER changes (what the cluster stores
// and Encode writes) and, once compiled against a Registry, the forms the
// server checks each command with (a bitmap of command ids, key patterns
// sorted by the access they grant). A User is never changed once built:
// SETUSER makes a new one, so a connection may hold one without a lock.
type User struct {
	name         string
	enabled      bool
	nopass       bool
	skipSanitize bool // Redis's skip-sanitize-payload; nothing here reads it
	passwords    [][sha256.Size]byte
	allKeys      bool
	keys         []keyPattern
	allChannels  bool
	channels     []string
	// allCommands is where the command rules start: +@all (true, and
	// commands a later build adds are allowed too) or -@all.
	allCommands bool
	// rules are the command rules after that start, in order, as Redis
	// keeps them: lower case, each command or category once, a command's
	// rule dropping its subcommands' earlier ones ("+@read", "-bf.add",
	// "+client|list").
	rules []string

	// Compiled against a registry (compile); empty in a User from Decode.
	bits                []uint64
	anyKey              []glob // every pattern: keys the command neither reads nor writes
	readKey, writeKey   []glob // patterns granting reads, writes
	readWriteKey        []glob // patterns granting both
	unrestrictedCommand bool
}

// keyPattern is a key glob and what it grants.
type keyPattern struct {
	pattern string
	access  Access
}

// NewUser is a user as ACL SETUSER creates it: off, no passwords, no keys,
// no channels, no commands (Redis 7's defaults, acl-pubsub-default
// resetchannels).
func NewUser(name string) *User { return &User{name: name} }

// newDefaultUser is Redis's default user: on, nopass, ~* &* +@all, with
// requirePass as its only password when there is one (--requirepass,
// Redis's ACLUpdateDefaultUserPassword).
func newDefaultUser(requirePass string) *User {
	u := &User{name: DefaultUser, enabled: true, allKeys: true, allChannels: true, allCommands: true}
	if requirePass == "" {
		u.nopass = true
	} else {
		u.passwords = [][sha256.Size]byte{sha256.Sum256([]byte(requirePass))}
	}
	return u
}

// Name is the user's name.
func (u *User) Name() string { return u.name }

// Enabled reports whether the user may authenticate (on).
func (u *User) Enabled() bool { return u.enabled }

// NoPass reports whether the user takes any password (nopass): AUTH with a
// password alone is refused (ErrAuthNoPassword) while the default user is
// so.
func (u *User) NoPass() bool { return u.nopass }

// Allowed reports whether the user may run the command id (a Registry's).
// Commands every user may run (AUTH, HELLO, QUIT, IDEM) are always
// allowed; keys are checked apart (KeyAllowed, or Registry.Check for both).
func (u *User) Allowed(id int) bool {
	w := uint(id) >> 6
	return w < uint(len(u.bits)) && u.bits[w]&(1<<(uint(id)&63)) != 0
}

// KeyAllowed reports whether the user may use key in a command that reads
// it, writes it, both, or neither (EXISTS, TYPE: any matching pattern
// will do). Patterns match case-sensitively, as Redis's.
func (u *User) KeyAllowed(key []byte, read, write bool) bool {
	if u.allKeys {
		return true
	}
	pats := u.anyKey
	switch {
	case read && write:
		pats = u.readWriteKey
	case read:
		pats = u.readKey
	case write:
		pats = u.writeKey
	}
	for i := range pats {
		if pats[i].match(key) {
			return true
		}
	}
	return false
}

// Unrestricted reports whether the user may run every command on every
// key (the default user, unless changed), so a server may skip the check.
func (u *User) Unrestricted() bool { return u.unrestrictedCommand && u.allKeys }

// HasCategory reports whether the user may run every command and subcommand
// reg puts in category c, whatever the rules that allow them (+@all,
// +@admin, or each command by name): what the HTTP API asks of a user for
// its admin routes (+@admin). One command of c forbidden (+@admin
// -config|set) is enough to fail. A category reg has no command of is held
// by nobody, so that an empty category never grants anything. Key
// patterns are not looked at.
func (u *User) HasCategory(reg *Registry, c Category) bool {
	found := false
	for id := range reg.Len() {
		if !reg.cats[id].Has(c) {
			continue
		}
		if !u.Allowed(id) {
			return false
		}
		found = true
	}
	return found
}

// CheckPassword reports whether pass is one of the user's passwords, or
// whether the user needs none (nopass). It compares digests in constant
// time, against every password, so the time says nothing of which matched
// or how much of one did. It does not look at on/off (Store.Authenticate
// does).
func (u *User) CheckPassword(pass string) bool {
	if u.nopass {
		return true
	}
	h := sha256.Sum256([]byte(pass))
	ok := 0
	for i := range u.passwords {
		ok |= subtle.ConstantTimeCompare(h[:], u.passwords[i][:])
	}
	return ok == 1
}

// flags lists the user's flags in Redis's order (ACLUserFlags).
func (u *User) flags() []string {
	f := make([]string, 0, 3)
	if u.enabled {
		f = append(f, "on")
	} else {
		f = append(f, "off")
	}
	if u.nopass {
		f = append(f, "nopass")
	}
	if u.skipSanitize {
		f = append(f, "skip-sanitize-payload")
	} else {
		f = append(f, "sanitize-payload")
	}
	return f
}

func (u *User) passwordHex() []string {
	out := make([]string, len(u.passwords))
	for i := range u.passwords {
		out[i] = hex.EncodeToString(u.passwords[i][:])
	}
	return out
}

// commandRules is the user's command rules as ACL GETUSER shows them: +@all
// or -@all, then the rules kept.
func (u *User) commandRules() string {
	base := "-@all"
	if u.allCommands {
		base = "+@all"
	}
	if len(u.rules) == 0 {
		return base
	}
	return base + " " + strings.Join(u.rules, " ")
}

func (p keyPattern) String() string {
	switch p.access {
	case KeyRead:
		return "%R~" + p.pattern
	case KeyWrite:
		return "%W~" + p.pattern
	}
	return "~" + p.pattern
}

func (u *User) keysString() string {
	if u.allKeys {
		return "~*"
	}
	s := make([]string, len(u.keys))
	for i, p := range u.keys {
		s[i] = p.String()
	}
	return strings.Join(s, " ")
}

func (u *User) channelsString() string {
	if u.allChannels {
		return "&*"
	}
	s := make([]string, len(u.channels))
	for i, c := range u.channels {
		s[i] = "&" + c
	}
	return strings.Join(s, " ")
}

// Rules describes the user as rules ACL SETUSER would rebuild it from,
// as Redis 7 writes them (ACLDescribeUser): flags, password hashes, keys,
// channels, commands. "on nopass sanitize-payload ~* &* +@all" for the
// default user.
func (u *User) Rules() string {
	var b strings.Builder
	for _, f := range u.flags() {
		b.WriteString(f)
		b.WriteByte(' ')
	}
	for _, h := range u.passwordHex() {
		b.WriteString("#")
		b.WriteString(h)
		b.WriteByte(' ')
	}
	if k := u.keysString(); k != "" {
		b.WriteString(k)
		b.WriteByte(' ')
	}
	if !u.allChannels {
		b.WriteString("resetchannels ")
	}
	if c := u.channelsString(); c != "" {
		b.WriteString(c)
		b.WriteByte(' ')
	}
	b.WriteString(u.commandRules())
	return b.String()
}

// Describe is the user's ACL LIST line (and aclfile line): "user default
// on nopass sanitize-payload ~* &* +@all".
func (u *User) Describe() string { return "user " + u.name + " " + u.Rules() }

// Info is what ACL GETUSER answers, field by field, in Redis 7's shape.
type Info struct {
	Flags     []string // "on"/"off", "nopass", "sanitize-payload"/"skip-sanitize-payload"; a set in RESP3
	Passwords []string // SHA-256 digests, hex
	Commands  string   // "+@all", "-@all +@read -bf.debug"
	Keys      string   // "~*", "%R~app:* ~tmp:*", or ""
	Channels  string   // "&*", "&news:*", or ""
	// Selectors are Redis 7's extra rule sets; Rookery has none, so this is
	// always empty (GETUSER still sends the field, as an empty array).
	Selectors []Info
}

// Fields lists Info's field names in the order ACL GETUSER sends them.
var Fields = []string{"flags", "passwords", "commands", "keys", "channels", "selectors"}

// GetUser is the user as ACL GETUSER shows it.
func (u *User) GetUser() Info {
	return Info{
		Flags:     u.flags(),
		Passwords: u.passwordHex(),
		Commands:  u.commandRules(),
		Keys:      u.keysString(),
		Channels:  u.channelsString(),
		Selectors: []Info{},
	}
}

// clone copies u's state, not its compiled forms.
func (u *User) clone() *User {
	return &User{
		name:         u.name,
		enabled:      u.enabled,
		nopass:       u.nopass,
		skipSanitize: u.skipSanitize,
		passwords:    append([][sha256.Size]byte(nil), u.passwords...),
		allKeys:      u.allKeys,
		keys:         append([]keyPattern(nil), u.keys...),
		allChannels:  u.allChannels,
		channels:     append([]string(nil), u.channels...),
		allCommands:  u.allCommands,
		rules:        append([]string(nil), u.rules...),
	}
}

// compile returns a copy of u with its checks built against reg: the
// command bitmap (from the start, +@all or -@all, and each rule in order,
// as Redis recomputes it; rules naming what reg lacks are skipped) and the
// key patterns sorted by the access they grant.
func (u *User) compile(reg *Registry) *User {
	c := u.clone()
	n := reg.Len()
	c.bits = growBits(nil, n)
	if u.allCommands {
		for id := range n {
			c.bits[id>>6] |= 1 << (uint(id) & 63)
		}
	}
	for _, r := range u.rules {
		c.applyCompiled(reg, r[0] == '+', r[1:])
	}
	for i, w := range reg.always {
		c.bits[i] |= w
	}
	c.unrestrictedCommand = true
	for id := range n {
		if !c.Allowed(id) {
			c.unrestrictedCommand = false
			break
		}
	}
	for _, p := range u.keys {
		g := compileGlob(p.pattern)
		c.anyKey = append(c.anyKey, g)
		if p.access&KeyRead != 0 {
			c.readKey = append(c.readKey, g)
		}
		if p.access&KeyWrite != 0 {
			c.writeKey = append(c.writeKey, g)
		}
		if p.access == KeyRead|KeyWrite {
			c.readWriteKey = append(c.readWriteKey, g)
		}
	}
	return c
}

// applyCompiled sets (allow) or clears the bits one kept rule names.
func (u *User) applyCompiled(reg *Registry, allow bool, name string) {
	if cat, ok := strings.CutPrefix(name, "@"); ok {
		c, ok := CategoryByName(cat)
		if !ok {
			return
		}
		// As Redis's ACLSetSelectorCommandBitsForCategory: a container in
		// the category changes with all its subcommands, then each
		// subcommand in it changes on its own.
		for id := range reg.Len() {
			if reg.parent[id] >= 0 {
				continue
			}
			if reg.cats[id].Has(c) {
				u.changePerm(reg, id, allow)
			}
			for _, sub := range reg.subs[id] {
				if reg.cats[sub].Has(c) {
					u.changePerm(reg, sub, allow)
				}
			}
		}
		return
	}
	if id, ok := reg.byName[name]; ok {
		u.changePerm(reg, id, allow)
	}
}

// changePerm allows or forbids a command, and a container's subcommands
// with it.
func (u *User) changePerm(reg *Registry, id int, allow bool) {
	set := func(i int) {
		if allow {
			u.bits[i>>6] |= 1 << (uint(i) & 63)
		} else {
			clearBit(u.bits, i)
		}
	}
	set(id)
	for _, sub := range reg.subs[id] {
		set(sub)
	}
}
