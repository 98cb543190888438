package transport

import (
	"bytes"
	"github.com/rookerydb/rookery/internal/acl"
	"strings"
)

// COMMAND and its subcommands, in Redis 7's reply shapes.
func commandSubcommands() []*command {
	a := flagsAdminish
	return []*command{
		{name: "count", arity: 2, flags: a, parse: parseCommandCount},
		{name: "info", arity: -2, flags: a, parse: parseCommandInfo},
		{name: "docs", arity: -2, flags: a, parse: parseCommandDocs},
		{name: "list", arity: -2, flags: a, parse: parseCommandList},
		{name: "getkeys", arity: -3, flags: a, parse: parseCommandGetKeys},
		{name: "help", arity: 2, flags: a, parse: helpParser(commandHelp)},
	}
}

var commandHelp = []string{
	"(no subcommand)",
	"    Return details about all commands.",
	"COUNT",
	"    Return the total number of commands in this server.",
	"LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
	"    Return a list of all commands in this server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full command.",
}

// parseCommandAll: COMMAND, every command's COMMAND INFO entry.
func parseCommandAll(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		w.array(len(s.cmdList))
		for _, cmd := range s.cmdList {
			commandInfo(w, cmd)
		}
	}), nil
}

// parseCommandCount: COMMAND COUNT, the top-level commands.
func parseCommandCount(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { w.int(int64(len(s.cmdList))) }), nil
}

// parseCommandInfo: COMMAND INFO [name ...], every command without names, nil
// for a name not served ("client|list" names a subcommand).
func parseCommandInfo(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		if len(args) == 2 {
			w.array(len(s.cmdList))
			for _, cmd := range s.cmdList {
				commandInfo(w, cmd)
			}
			return
		}
		w.array(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := s.commandNamed(name); cmd != nil {
				commandInfo(w, cmd)
			} else {
				w.null()
			}
		}
	}), nil
}

// commandNamed finds a command or a subcommand ("config|get") by name,
// ignoring case.
func (s *Server) commandNamed(name []byte) *command {
	top, sub, isSub := bytes.Cut(name, []byte("|"))
	cmd := s.cmds[string(bytes.ToLower(top))]
	if cmd == nil || !isSub {
		return cmd
	}
	return cmd.sub(sub)
}

// parseCommandDocs: COMMAND DOCS [name ...], a map of each command served to
// its documentation (commanddocs.go); names not served are left out.
func parseCommandDocs(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		var cmds []*command
		if len(args) == 2 {
			cmds = s.cmdList
		} else {
			for _, name := range args[2:] {
				if cmd := s.commandNamed(name); cmd != nil {
					cmds = append(cmds, cmd)
				}
			}
		}
		w.mapHeader(len(cmds))
		for _, cmd := range cmds {
			w.bulkString(cmd.name)
			writeDocs(w, cmd)
		}
	}), nil
}

// parseCommandList: COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN
// pattern], the names of commands and subcommands. The filter commands belong
// to module bf.
func parseCommandList(s *Server, args [][]byte) (op, error) {
	var keep func(cmd *command) bool
	switch {
	case len(args) == 2:
		keep = func(*command) bool { return true }
	case len(args) == 5 && keyword(args[2], "FILTERBY"):
		v := args[4]
		switch {
		case keyword(args[3], "MODULE"):
			keep = func(cmd *command) bool { return string(v) == "bf" && docOf(cmd.name).module == "bf" }
		case keyword(args[3], "ACLCAT"):
			cat, ok := acl.CategoryByName(string(v))
			if !ok {
				return op{}, redisError(acl.UnknownCategory(string(v)).Error())
			}
			keep = func(cmd *command) bool { return s.aclReg.Categories(cmd.aclID).Has(cat) }
		case keyword(args[3], "PATTERN"):
			keep = func(cmd *command) bool { return globMatch(v, []byte(cmd.name)) }
		default:
			return op{}, errSyntax
		}
	default:
		return op{}, errSyntax
	}
	return localOp(func(c *session, w *reply) {
		var names []string
		for _, cmd := range s.cmdList {
			for _, x := range append([]*command{cmd}, cmd.subs...) {
				if keep(x) {
					names = append(names, x.name)
				}
			}
		}
		w.array(len(names))
		for _, n := range names {
			w.bulkString(n)
		}
	}), nil
}

// parseCommandGetKeys: COMMAND GETKEYS command [arg ...], the keys the
// command would touch, from its key positions.
func parseCommandGetKeys(s *Server, args [][]byte) (op, error) {
	full := args[2:]
	cmd := s.cmds[strings.ToLower(string(full[0]))]
	if cmd != nil && cmd.subs != nil && len(full) > 1 {
		cmd = cmd.sub(full[1])
	}
	switch {
	case cmd == nil:
		return op{}, redisError("ERR Invalid command specified")
	case cmd.firstKey == 0:
		return op{}, redisError("ERR The command has no key arguments")
	case !arityOK(cmd.arity, len(full)):
		return op{}, redisError("ERR Invalid number of arguments specified for command")
	}
	last := cmd.lastKey
	if last < 0 {
		last += len(full)
	}
	var keys [][]byte
	for i := cmd.firstKey; i <= last && i < len(full); i += max(cmd.step, 1) {
		keys = append(keys, full[i])
	}
	return localOp(func(c *session, w *reply) {
		w.array(len(keys))
		for _, k := range keys {
			w.bulk(k)
		}
	}), nil
}

// commandInfo renders one command as Redis 7's ten-element COMMAND entry:
// name, arity, flags (a set), first key, last key, key step, ACL categories
// (a set), tips, key specs, and subcommands (each such an entry itself; an
// empty set when there are none).
func commandInfo(w *reply, cmd *command) {
	w.array(10)
	w.bulkString(cmd.name)
	w.int(int64(cmd.arity))
	w.set(len(cmd.flags))
	for _, f := range cmd.flags {
		w.simple(f)
	}
	w.int(int64(cmd.firstKey))
	w.int(int64(cmd.lastKey))
	w.int(int64(cmd.step))
	cats := aclCategories(cmd.name)
	w.set(len(cats))
	for _, c := range cats {
		w.simple(c)
	}
	w.array(0) // tips
	w.array(0) // key specs
	if len(cmd.subs) == 0 {
		w.set(0)
		return
	}
	w.array(len(cmd.subs))
	for _, sc := range cmd.subs {
		commandInfo(w, sc)
	}
}

// aclCategories are a command's ACL categories as COMMAND INFO shows them
// ("@read", "@bloom").
func aclCategories(name string) []string {
	row, ok := acl.Lookup(name)
	if !ok {
		return nil
	}
	return row.Categories.Flags()
}
