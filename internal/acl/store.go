package acl

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"sync"
	"sync/atomic"
)

// Account is a user's place in a Store: a connection that authenticated as
// the user keeps it, and sees every change to the user at its next command,
// as in Redis, with one atomic load.
type Account struct {
	name string
	user atomic.Pointer[User]
}

// Name is the user's name (ACL WHOAMI).
func (a *Account) Name() string { return a.name }

// User is the user's rules now, compiled; nil once the user was deleted
// (Redis then closes the user's connections).
func (a *Account) User() *User { return a.user.Load() }

// Store holds a node's users, each compiled against the node's registry.
// Connections read it concurrently; changes come from one goroutine at a
// time (the state machine's), each replacing a whole User.
type Store struct {
	reg *Registry
	// changed, if set, is told of every change (OnChange).
	changed atomic.Pointer[func()]
	// mu guards accounts; an Account's user is swapped atomically, so a
	// connection holding one never takes it.
	mu       sync.RWMutex
	accounts map[string]*Account
}

// NewStore holds the default user alone: on, every command, every key, no
// password, or requirePass as its password (--requirepass).
func NewStore(reg *Registry, requirePass string) *Store {
	s := &Store{reg: reg, accounts: map[string]*Account{}}
	s.put(newDefaultUser(requirePass))
	return s
}

// OnChange has f called after every change to the users, on the changing
// goroutine (the state machine's): it must not block or call back into the
// store's writers. One function at a time; nil removes it.
func (s *Store) OnChange(f func()) {
	if f == nil {
		s.changed.Store(nil)
		return
	}
	s.changed.Store(&f)
}

func (s *Store) notify() {
	if f := s.changed.Load(); f != nil {
		(*f)()
	}
}

// Registry is the registry the store's users are compiled against.
func (s *Store) Registry() *Registry { return s.reg }

// put stores u, compiled, in its account, creating the account if needed.
// Call with mu held for writing, or before the store is shared.
func (s *Store) put(u *User) {
	a := s.accounts[u.name]
	if a == nil {
		a = &Account{name: u.name}
		s.accounts[u.name] = a
	}
	a.user.Store(u.compile(s.reg))
}

// Account finds a user's account; nil if there is no such user.
func (s *Store) Account(name string) *Account {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.accounts[name]
}

// Default is the default user's account, every new connection's.
func (s *Store) Default() *Account { return s.Account(DefaultUser) }

// AuthRequired reports whether a new connection must authenticate before
// anything but AUTH, HELLO and QUIT, as Redis decides it: unless the default
// user is on and takes any password, it must.
func (s *Store) AuthRequired() bool {
	u := s.Default().User()
	return !u.nopass || !u.enabled
}

// User finds a user; nil if there is none.
func (s *Store) User(name string) *User {
	if a := s.Account(name); a != nil {
		return a.User()
	}
	return nil
}

// decoy stands in for a user that does not exist, so that Authenticate
// hashes and compares as much for a wrong name as for a wrong password.
var decoy = &User{passwords: make([][sha256.Size]byte, 1)}

// Authenticate checks AUTH's or HELLO AUTH's credentials and returns the
// account to run as, or ErrWrongPass for a missing user, a disabled one or
// a wrong password alike, as Redis answers. A user's password is compared
// whether or not the user is enabled, and a missing user's name costs the
// same hashing, so the time taken says little.
func (s *Store) Authenticate(name, pass string) (*Account, error) {
	a := s.Account(name)
	var u *User
	if a != nil {
		u = a.User()
	}
	if u == nil {
		decoy.CheckPassword(pass)
		return nil, ErrWrongPass
	}
	if !u.CheckPassword(pass) || !u.enabled {
		return nil, ErrWrongPass
	}
	return a, nil
}

// Validate is ACL SETUSER without the change: whether rules would apply to
// the user (a new one if none), checked against this node's commands, with
// Redis's error if not. A node answers a client with it before proposing
// the rules to the log (doc.go).
func (s *Store) Validate(name string, rules []string) error {
	_, err := s.apply(name, rules, s.reg)
	return err
}

// SetUser applies ACL SETUSER rules to a user, creating it if needed, all
// or nothing, checking command and category names against the registry.
func (s *Store) SetUser(name string, rules []string) error {
	return s.setUser(name, rules, s.reg)
}

// ApplySetUser is SetUser as the state machine runs it, from the log: names
// are checked for their form only (Validate checked them where the command
// was received), so that every node reaches the same users whatever
// commands its build has. It fails only where the state decides (removing a
// password the user no longer has, a pattern after allkeys), the same way
// on every node.
func (s *Store) ApplySetUser(name string, rules []string) error {
	return s.setUser(name, rules, nil)
}

func (s *Store) setUser(name string, rules []string, reg *Registry) error {
	s.mu.Lock()
	u, err := s.applyLocked(name, rules, reg)
	if err == nil {
		s.put(u)
	}
	s.mu.Unlock()
	if err == nil {
		s.notify()
	}
	return err
}

func (s *Store) apply(name string, rules []string, reg *Registry) (*User, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applyLocked(name, rules, reg)
}

func (s *Store) applyLocked(name string, rules []string, reg *Registry) (*User, error) {
	if !ValidUsername(name) {
		return nil, ErrBadUsername
	}
	base := NewUser(name)
	if a := s.accounts[name]; a != nil {
		base = a.User()
	}
	return base.Apply(rules, reg)
}

// DelUser deletes users (ACL DELUSER) and says how many existed. Deleting
// the default user is refused, and then nothing is deleted. A deleted
// user's Account answers nil from then on.
func (s *Store) DelUser(names ...string) (int, error) {
	for _, n := range names {
		if n == DefaultUser {
			return 0, ErrDeleteDefault
		}
	}
	s.mu.Lock()
	deleted := 0
	for _, n := range names {
		if a := s.accounts[n]; a != nil {
			a.user.Store(nil)
			delete(s.accounts, n)
			deleted++
		}
	}
	s.mu.Unlock()
	s.notify()
	return deleted, nil
}

// Users lists the users by name.
func (s *Store) Users() []*User {
	s.mu.RLock()
	out := make([]*User, 0, len(s.accounts))
	for _, a := range s.accounts {
		out = append(out, a.User())
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Names lists the users' names, sorted (ACL USERS).
func (s *Store) Names() []string {
	us := s.Users()
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.name
	}
	return out
}

// List is ACL LIST: each user's line, by name.
func (s *Store) List() []string {
	us := s.Users()
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Describe()
	}
	return out
}

// Replace makes users the whole set (a snapshot restored, an aclfile
// loaded), adding Redis's default user (on, nopass, everything) if they
// have none, as ACL LOAD does. Accounts of users that remain see their new
// rules; accounts of users that are gone answer nil.
func (s *Store) Replace(users []*User) {
	next := make(map[string]*User, len(users)+1)
	for _, u := range users {
		next[u.name] = u
	}
	if next[DefaultUser] == nil {
		next[DefaultUser] = newDefaultUser("")
	}
	s.mu.Lock()
	for n, a := range s.accounts {
		if next[n] == nil {
			a.user.Store(nil)
			delete(s.accounts, n)
		}
	}
	for _, u := range next {
		s.put(u)
	}
	s.mu.Unlock()
	s.notify()
}

// Encode is the store's users in Encode's format, for a snapshot.
func (s *Store) Encode() []byte { return Encode(s.Users()) }

// DryRun is ACL DRYRUN for a command the server has resolved and whose
// arity it has checked: "OK", or why the user may not run it, in Redis's
// words. For IDEM, pass the wrapped command and its arguments.
func (s *Store) DryRun(username string, id int, args [][]byte) (string, error) {
	u := s.User(username)
	if u == nil {
		return "", UserNotFound(username)
	}
	if d := s.reg.Check(u, id, args); d != nil {
		return d.Verbose(), nil
	}
	return "OK", nil
}

// DefaultGenPassBits is ACL GENPASS's size without an argument.
const DefaultGenPassBits = 256

const maxGenPassBits = 4096

// GenPass is ACL GENPASS: bits random bits (rounded up to a hex digit) from
// the system's secure source, in lower-case hex.
func GenPass(bits int64) (string, error) {
	if bits <= 0 || bits > maxGenPassBits {
		return "", ErrGenPassBits
	}
	chars := (bits + 3) / 4
	b := make([]byte, (chars+1)/2)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b)[:chars], nil
}
