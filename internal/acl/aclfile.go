package acl

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ParseFile reads users in Redis's aclfile format (--aclfile): one user a
// line, "user <name> <rule>...", rules as ACL SETUSER takes them, applied to
// a new user and checked against reg. Blank lines are skipped; so are lines
// starting with '#', which Redis refuses (it rewrites the file on ACL SAVE
// and would lose them) but which cost nothing here, where the file is only
// read. As in Redis, words are separated by single spaces (a tab inside a
// rule is part of it), "user" is lower case, a user may appear once, and
// the default user, if the file lacks it, is Redis's (on, nopass, every
// command and key).
//
// Every bad line is reported, joined, each as "file:line: reason" wrapping
// ErrFile, and then no user is returned. A failed rule is quoted only when
// it names an unknown command or category: another may hold a password.
func ParseFile(r io.Reader, name string, reg *Registry) ([]*User, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read aclfile %s: %w", name, err)
	}
	var (
		errs  []error
		users = map[string]*User{}
	)
	fail := func(line int, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: %s:%d: %s", ErrFile, name, line, fmt.Sprintf(format, a...)))
	}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		args := strings.Split(line, " ")
		if args[0] != "user" || len(args) < 2 {
			fail(n, "should start with user keyword followed by the username")
			continue
		}
		uname := args[1]
		if !ValidUsername(uname) {
			fail(n, "username '%s' contains invalid characters", uname)
			continue
		}
		if users[uname] != nil {
			fail(n, "duplicate user '%s'", uname)
			continue
		}
		rules := args[2:]
		for j := range rules {
			rules[j] = strings.Trim(rules[j], "\t\r\n")
		}
		u, err := NewUser(uname).Apply(rules, reg)
		var se *SetUserError
		switch {
		case errors.As(err, &se) && se.Reason == msgUnknown:
			fail(n, "Error in applying operation '%s': %s", se.Rule, se.Reason)
		case errors.As(err, &se):
			fail(n, "%s", se.Reason)
		case err != nil:
			fail(n, "%v", err)
		default:
			users[uname] = u
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if users[DefaultUser] == nil {
		users[DefaultUser] = newDefaultUser("")
	}
	out := make([]*User, 0, len(users))
	for _, u := range users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// FormatFile writes users as an aclfile, one Describe line each, by name:
// what ParseFile reads back to the same users.
func FormatFile(users []*User) string {
	us := append([]*User(nil), users...)
	sort.Slice(us, func(i, j int) bool { return us[i].name < us[j].name })
	var b strings.Builder
	for _, u := range us {
		b.WriteString(u.Describe())
		b.WriteByte('\n')
	}
	return b.String()
}
