package fsm

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/rookerydb/rookery/internal/acl"
)

// Users (Redis ACLs) are cluster state: ACL SETUSER and DELUSER go through the
// log of the group that holds them (group 0: the only group, or the map
// group of a sharded cluster), and every node's users change at the same
// index. The state machine applies rules with acl.Store.ApplySetUser, which
// needs no clock and checks names for their form only, so every replica
// reaches the same users whatever commands its build knows. Passwords arrive
// as SHA-256 digests (the node that took the command hashed them).
//
// The default user is the node's --requirepass (Options.RequirePass) until
// the log sets it (ACL SETUSER default ...): from then on it is the log's,
// the same on every node. A snapshot holds the users the log set, the
// default among them only once set, in a section 'U' (snapshot version 6).
//
// ACL_LOAD (an --aclfile read at bootstrap) applies only while the log has
// never set users: the first node to propose its file seeds the cluster, and
// a file given to a later node, or at a restart, changes nothing.
//
// ACL_RESTORE brings back the users of a backup (a sharded cluster's bundle
// carries group 0's users section beside the shards'): they replace the
// log's, whatever it set before, as restoring a snapshot replaces them.

// ErrACLRule answers an ACL SETUSER whose rule, at Result.Ints[0], the state
// refused when it applied (removing a password the user no longer has): the
// node words it as Redis does.
var ErrACLRule = errors.New("ACL rule refused")

// ErrNoUsers answers an ACL op in a group that holds no users.
var ErrNoUsers = errors.New("this group holds no users")

// usersState is what the log decided about users beyond the users
// themselves.
type usersState struct {
	// usersSet: an ACL op has applied (or a snapshot said so): ACL_LOAD no
	// longer applies.
	usersSet bool
	// defaultSet: the log set the default user, which --requirepass no
	// longer decides.
	defaultSet bool
	// usersVersion counts changes to the users, for those who cache them.
	usersVersion atomic.Uint64
}

// UsersVersion counts every change to the users this state machine holds;
// 0 for a group that holds none.
func (f *FSM) UsersVersion() uint64 { return f.usersVersion.Load() }

func (f *FSM) applyACLSetUser(c *Command) *Result {
	if f.users == nil {
		return &Result{Err: ErrNoUsers}
	}
	rules := make([]string, len(c.Items))
	for i, r := range c.Items {
		rules[i] = string(r)
	}
	if err := f.users.ApplySetUser(c.Key, rules); err != nil {
		idx := int64(0)
		var se *acl.SetUserError
		if errors.As(err, &se) {
			idx = int64(se.Index)
		}
		return &Result{Err: ErrACLRule, Ints: []int64{idx}}
	}
	f.usersSet = true
	f.defaultSet = f.defaultSet || c.Key == acl.DefaultUser
	f.usersChanged()
	return &Result{}
}

func (f *FSM) applyACLDelUser(c *Command) *Result {
	if f.users == nil {
		return &Result{Err: ErrNoUsers}
	}
	n, err := f.users.DelUser(c.Keys...)
	if err != nil {
		return &Result{Err: ErrACLRule, Ints: []int64{0}}
	}
	f.usersSet = true
	f.usersChanged()
	return &Result{Ints: []int64{int64(n)}}
}

func (f *FSM) applyACLLoad(c *Command) *Result {
	if f.users == nil {
		return &Result{Err: ErrNoUsers}
	}
	if f.usersSet {
		return &Result{Ints: []int64{0}}
	}
	users, err := acl.Decode(c.Data)
	if err != nil {
		return &Result{Err: ErrBadData}
	}
	f.setUsers(users)
	f.usersSet = true
	f.usersChanged()
	return &Result{Ints: []int64{1}}
}

// setUsers makes users the whole set, the node's default user added when
// they have none (and then the log has not set it).
func (f *FSM) setUsers(users []*acl.User) {
	f.defaultSet = false
	for _, u := range users {
		f.defaultSet = f.defaultSet || u.Name() == acl.DefaultUser
	}
	if !f.defaultSet {
		users = append(users, f.nodeDefault())
	}
	f.users.Replace(users)
}

// nodeDefault is the default user as --requirepass makes it.
func (f *FSM) nodeDefault() *acl.User {
	return acl.NewStore(f.users.Registry(), f.requirePass).User(acl.DefaultUser)
}

// logUsers is the users the log set: every user but a default user that
// only --requirepass made.
func (f *FSM) logUsers() []*acl.User {
	var out []*acl.User
	for _, u := range f.users.Users() {
		if u.Name() != acl.DefaultUser || f.defaultSet {
			out = append(out, u)
		}
	}
	return out
}

// encodeUsers is the snapshot's users section: a flags byte (bit 0: users
// were set; bit 1: the default user is the log's) and acl.Encode.
func (f *FSM) encodeUsers() []byte {
	var flags byte
	if f.usersSet {
		flags |= 1
	}
	if f.defaultSet {
		flags |= 2
	}
	return append([]byte{flags}, acl.Encode(f.logUsers())...)
}

// UsersSection is the users this state machine holds, as its snapshot's
// users section holds them (a flags byte and acl.Encode), read under the
// apply lock: what OpACLRestore takes back. nil when the log never set
// users, or for a group that holds none. A sharded cluster's backup carries
// group 0's (cluster/bundle.go), which no shard's backup holds.
func (f *FSM) UsersSection() []byte {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if f.users == nil || !f.usersSet {
		return nil
	}
	return f.encodeUsers()
}

// CheckUsersSection reads a users section (UsersSection) as a restore
// would, and says how many users it holds, or why it is damaged. An empty
// one holds none.
func CheckUsersSection(sec []byte) (int, error) {
	if len(sec) == 0 {
		return 0, nil
	}
	_, users, err := decodeUsersSection(sec)
	return len(users), err
}

// decodeUsersSection reads a non-empty users section: its flags and users,
// checked against each other.
func decodeUsersSection(sec []byte) (flags byte, users []*acl.User, err error) {
	if sec[0]&^3 != 0 {
		return 0, nil, fmt.Errorf("users section: unknown flags %#x", sec[0])
	}
	users, err = acl.Decode(sec[1:])
	if err != nil {
		return 0, nil, fmt.Errorf("users section: %w", err)
	}
	hasDefault := false
	for _, u := range users {
		hasDefault = hasDefault || u.Name() == acl.DefaultUser
	}
	if hasDefault != (sec[0]&2 != 0) {
		return 0, nil, errors.New("users section: the default user's flag and the users disagree")
	}
	return sec[0], users, nil
}

// restoreUsers installs a users section (nil: none, as before any was set).
func (f *FSM) restoreUsers(sec []byte) error {
	if f.users == nil {
		if len(sec) > 0 && sec[0]&1 != 0 {
			f.log.Warn("snapshot holds users, but this group holds none; ignoring them")
		}
		return nil
	}
	_, err := f.installUsers(sec)
	return err
}

// installUsers makes the users those of sec (empty: none set, the node's
// default user alone) and returns how many the log now holds; a damaged sec
// changes nothing.
func (f *FSM) installUsers(sec []byte) (int, error) {
	if len(sec) == 0 {
		f.usersSet, f.defaultSet = false, false
		f.users.Replace([]*acl.User{f.nodeDefault()})
		f.usersChanged()
		return 0, nil
	}
	flags, users, err := decodeUsersSection(sec)
	if err != nil {
		return 0, err
	}
	f.setUsers(users)
	f.usersSet = flags&1 != 0
	f.usersChanged()
	return len(users), nil
}

// applyACLRestore makes the users those of a backup: Data is a users section
// (UsersSection; empty when the backup's cluster never set users), which
// replaces whatever the log set before, as restoring a snapshot does. A
// damaged one is refused with ErrBadData, and nothing changes.
func (f *FSM) applyACLRestore(c *Command) *Result {
	if f.users == nil {
		return &Result{Err: ErrNoUsers}
	}
	n, err := f.installUsers(c.Data)
	if err != nil {
		f.log.Warn("a restore of users refused", "index", f.applying, "err", err)
		return &Result{Err: ErrBadData}
	}
	return &Result{Ints: []int64{int64(n)}}
}

// DescribeACLError words an ErrACLRule result for rules as Redis would.
func DescribeACLError(rules []string, r *Result) string {
	i := 0
	if len(r.Ints) > 0 && r.Ints[0] >= 0 && int(r.Ints[0]) < len(rules) {
		i = int(r.Ints[0])
	}
	rule := ""
	if i < len(rules) {
		rule = rules[i]
		if strings.HasPrefix(rule, ">") || strings.HasPrefix(rule, "<") {
			rule = rule[:1] + "..."
		}
	}
	return "ERR Error in ACL SETUSER modifier '" + rule + "': the rule no longer applies to the user"
}

// usersChanged counts a change to the users and tells Options.OnUsers.
func (f *FSM) usersChanged() {
	f.usersVersion.Add(1)
	if f.onUsers != nil {
		f.onUsers()
	}
}
