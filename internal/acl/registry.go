package acl

import (
	"fmt"
	"sort"
	"strings"
)

// Registry numbers the commands one server serves, so that a user's
// permissions are a bitmap indexed by command id. Ids are this process's
// own: what the cluster stores are rules, by name (doc.go), and every node
// compiles them against its own registry. A Registry is read-only once
// built.
type Registry struct {
	names  []string
	byName map[string]int
	cats   []CategorySet
	parent []int   // the container's id, -1 for a top-level command
	subs   [][]int // a container's subcommands
	keys   [][]KeySpec
	always []uint64 // NoAuth and Wrapper commands, which every user may run
}

// NewRegistry numbers names, the server's commands and subcommands
// ("client|list") in lower case; each takes its categories from the table,
// and a subcommand's container must be among them. The ids follow the
// names' sorted order, whatever order they come in.
func NewRegistry(names []string) (*Registry, error) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	r := &Registry{byName: make(map[string]int, len(sorted))}
	for _, n := range sorted {
		if _, dup := r.byName[n]; dup {
			return nil, fmt.Errorf("%w: %q named twice", ErrRegistry, n)
		}
		row, ok := Lookup(n)
		if !ok {
			return nil, fmt.Errorf("%w: command %q has no row in the ACL table", ErrRegistry, n)
		}
		id := len(r.names)
		r.byName[n] = id
		r.names = append(r.names, n)
		r.cats = append(r.cats, row.Categories)
		r.keys = append(r.keys, row.Keys)
		r.parent = append(r.parent, -1)
		r.subs = append(r.subs, nil)
		if row.NoAuth || row.Wrapper {
			r.always = setBit(r.always, id)
		}
	}
	for id, n := range r.names {
		c, _, isSub := strings.Cut(n, "|")
		if !isSub {
			continue
		}
		p, ok := r.byName[c]
		if !ok {
			return nil, fmt.Errorf("%w: subcommand %q without its container %q", ErrRegistry, n, c)
		}
		r.parent[id] = p
		r.subs[p] = append(r.subs[p], id)
	}
	r.always = growBits(r.always, len(r.names))
	return r, nil
}

// Len is the number of commands; ids run from 0 to Len()-1.
func (r *Registry) Len() int { return len(r.names) }

// ID is the id of a command or subcommand by its lower-case name, as the
// server resolves it once, when it builds its own table.
func (r *Registry) ID(name string) (int, bool) {
	id, ok := r.byName[name]
	return id, ok
}

// Name is the command's full name ("client|list"), as NOPERM and the ACL
// log show it.
func (r *Registry) Name(id int) string { return r.names[id] }

// Categories is the command's categories (COMMAND INFO shows them with
// CategorySet.Flags).
func (r *Registry) Categories(id int) CategorySet { return r.cats[id] }

// InCategory lists the commands and subcommands in c by name: ACL CAT c.
func (r *Registry) InCategory(c Category) []string {
	var out []string
	for id, n := range r.names {
		if r.cats[id].Has(c) {
			out = append(out, n)
		}
	}
	return out
}

// lookupFold finds a command by name ignoring case, as rules name them.
func (r *Registry) lookupFold(name string) (int, bool) {
	id, ok := r.byName[strings.ToLower(name)]
	return id, ok
}

// isContainer reports whether id has subcommands.
func (r *Registry) isContainer(id int) bool { return len(r.subs[id]) > 0 }

// Check decides whether u may run the command id with args (the whole
// request, its name at args[0]): nil, or why not. It is what the server asks
// before running each command, after it has checked the arity, as Redis
// does. For IDEM, ask about the wrapped command and its arguments.
func (r *Registry) Check(u *User, id int, args [][]byte) *Denial {
	if !u.Allowed(id) {
		return &Denial{Reason: ReasonCommand, User: u.name, Command: r.names[id], Object: r.names[id]}
	}
	if u.allKeys {
		return nil
	}
	for _, ks := range r.keys[id] {
		last := ks.Last
		if last < 0 {
			last += len(args)
		}
		step := max(ks.Step, 1)
		read, write := ks.Access&KeyRead != 0, ks.Access&KeyWrite != 0
		for i := ks.First; i <= last && i < len(args); i += step {
			if !u.KeyAllowed(args[i], read, write) {
				return &Denial{Reason: ReasonKey, User: u.name, Command: r.names[id], Object: string(args[i]), ArgPos: i}
			}
		}
	}
	return nil
}

func setBit(bits []uint64, id int) []uint64 {
	bits = growBits(bits, id+1)
	bits[id>>6] |= 1 << (uint(id) & 63)
	return bits
}

func clearBit(bits []uint64, id int) {
	bits[id>>6] &^= 1 << (uint(id) & 63)
}

// growBits makes bits long enough for n ids.
func growBits(bits []uint64, n int) []uint64 {
	for len(bits) < (n+63)/64 {
		bits = append(bits, 0)
	}
	return bits
}
