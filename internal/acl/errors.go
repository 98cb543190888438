package acl

import (
	"errors"
	"fmt"
)

// ReplyError is an error a client sees as it is: its text is the whole
// RESP error line without the '-', in Redis's words.
type ReplyError string

// Error is the reply's text.
func (e ReplyError) Error() string { return string(e) }

// Errors of the package. The Reply ones are Redis's own words, to send as
// they are.
var (
	// ErrRegistry: NewRegistry was given a command the table has no row
	// for, a name twice, or a subcommand without its container.
	ErrRegistry = errors.New("acl: bad command registry")
	// ErrCorrupt: Decode met bytes that are not an encoding of users.
	ErrCorrupt = errors.New("acl: corrupt users encoding")
	// ErrVersion: Decode met an encoding newer than this build reads.
	ErrVersion = errors.New("acl: unknown users encoding version")
	// ErrFile: ParseFile met a line it cannot load; the error names the
	// file and line.
	ErrFile = errors.New("acl: bad aclfile")

	// ErrWrongPass refuses AUTH and HELLO AUTH alike for a missing user, a
	// disabled one and a wrong password, so that the reply tells nothing.
	ErrWrongPass = ReplyError("WRONGPASS invalid username-password pair or user is disabled.")
	// ErrAuthNoPassword answers AUTH with a password alone while the
	// default user needs none.
	ErrAuthNoPassword = ReplyError("ERR AUTH <password> called without any password configured " +
		"for the default user. Are you sure your configuration is correct?")
	// ErrDeleteDefault refuses ACL DELUSER default (nothing is deleted).
	ErrDeleteDefault = ReplyError("ERR The 'default' user cannot be removed")
	// ErrBadUsername refuses ACL SETUSER of a name with a space or a NUL.
	ErrBadUsername = ReplyError("ERR Usernames can't contain spaces or null characters")
	// ErrGenPassBits refuses ACL GENPASS of a size out of range.
	ErrGenPassBits = ReplyError(fmt.Sprintf("ERR ACL GENPASS argument must be the number of bits for "+
		"the output password, a positive number up to %d", maxGenPassBits))
)

// UnknownCategory is ACL CAT's reply for a category it does not know.
func UnknownCategory(name string) error {
	return ReplyError(fmt.Sprintf("ERR Unknown category '%.128s'", name))
}

// UserNotFound is ACL DRYRUN's reply for a missing user.
func UserNotFound(name string) error {
	return ReplyError(fmt.Sprintf("ERR User '%s' not found", name))
}

// CommandNotFound is ACL DRYRUN's reply for a command the server lacks.
func CommandNotFound(name string) error {
	return ReplyError(fmt.Sprintf("ERR Command '%s' not found", name))
}

// Why ACL SETUSER refuses a rule, in Redis's words (acl.c
// ACLSetUserStringError), but for firstArgs, which is ours: Redis lets a
// rule allow one first argument of a command (+select|0); Rookery does not.
const (
	msgSyntax        = "Syntax error"
	msgUnknown       = "Unknown command or category name in ACL"
	msgKeysAfterAll  = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	msgChansAfterAll = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	msgNoSuchPass    = "The password you are trying to remove from the user does not exist"
	msgBadHash       = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	msgSubFirstArg   = "Allowing first-arg of a subcommand is not supported"
	msgFirstArg      = "Allowing first-arg of an otherwise blocked command is not supported"
)

// SetUserError is why ACL SETUSER changed nothing: the first rule that
// failed, by its position among the rules, and Redis's reason.
type SetUserError struct {
	Index  int    // the rule's position in the list given
	Rule   string // the rule as given
	Reason string
}

// Error is Redis's reply. It repeats the rule, as Redis does: a rule that
// fails may hold a password (<pass), so log Redacted instead.
func (e *SetUserError) Error() string {
	return "ERR Error in ACL SETUSER modifier '" + e.Rule + "': " + e.Reason
}

// Redacted is the error with a password rule's password left out, for
// logs.
func (e *SetUserError) Redacted() string {
	return "ERR Error in ACL SETUSER modifier '" + redactRule(e.Rule) + "': " + e.Reason
}

// redactRule hides what a password rule carries.
func redactRule(r string) string {
	if len(r) > 0 && (r[0] == '>' || r[0] == '<') {
		return r[:1] + "..."
	}
	return r
}

// Reason is why a command was refused, or what ACL LOG records.
type Reason uint8

// Reasons, as ACL LOG names them.
const (
	ReasonCommand Reason = iota
	ReasonKey
	ReasonChannel
	ReasonAuth
)

// String is ACL LOG's name of r.
func (r Reason) String() string {
	switch r {
	case ReasonCommand:
		return "command"
	case ReasonKey:
		return "key"
	case ReasonChannel:
		return "channel"
	case ReasonAuth:
		return "auth"
	}
	return "unknown"
}

// Denial is why a user may not run a command: the command itself, or one of
// its keys.
type Denial struct {
	Reason  Reason // ReasonCommand or ReasonKey
	User    string
	Command string // the full name: "bf.add", "client|list"
	Object  string // what ACL LOG records: the command's full name, or the key
	ArgPos  int    // the key's position among the arguments
}

// Error is the NOPERM reply, in Redis 7's words; a key refusal does not
// name the key (Redis leaves it to the ACL log).
func (d *Denial) Error() string {
	if d.Reason == ReasonKey {
		return "NOPERM No permissions to access a key"
	}
	return "NOPERM User " + d.User + " has no permissions to run the '" + d.Command + "' command"
}

// Verbose is ACL DRYRUN's answer, which names the key.
func (d *Denial) Verbose() string {
	if d.Reason == ReasonKey {
		return "User " + d.User + " has no permissions to access the '" + d.Object + "' key"
	}
	return "User " + d.User + " has no permissions to run the '" + d.Command + "' command"
}
