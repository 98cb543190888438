// Package command is how the rookery binary runs its tools. Each tool lives
// in a package of its own under cmd/node/internal (importcmd, migratecmd,
// snapshotcmd, recovercmd, tlscmd, probecmd, opscmd) and hands out a Command:
// its name, its line in `rookery -h`, and the function that runs it. The
// binary lists them all in one Table (cmd/node/main.go's commands) and
// dispatches through it; nothing registers itself.
package command

import "io"

// Func runs a command: its arguments (those after its name), the environment
// (os.LookupEnv, or a fake in tests), stdout and stderr in; the exit code
// out. A command reads no other environment and writes nowhere else, so that
// a test runs it in its own process as the binary would.
type Func func(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int

// Command is one of the binary's commands.
type Command struct {
	// Name is the first argument that selects it: `rookery NAME ...`.
	Name string
	// Synopsis is its line in `rookery -h`; an alias (-h, --version) has
	// none and is not listed.
	Synopsis string
	Run      Func
}

// Table is the binary's commands, in the order -h lists them.
type Table []Command

// Lookup is the command named name.
func (t Table) Lookup(name string) (Command, bool) {
	for _, c := range t {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// Names are the names of the listed commands (those with a synopsis), for
// suggestions.
func (t Table) Names() []string {
	var out []string
	for _, c := range t {
		if c.Synopsis != "" {
			out = append(out, c.Name)
		}
	}
	return out
}

// Alias is c under another name, left out of -h.
func Alias(name string, c Command) Command {
	return Command{Name: name, Run: c.Run}
}
