package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Flag errors that say what to do: an unknown flag gets the closest known one,
// a value that does not parse gets what the flag wants (a duration's units,
// a whole number, true or false), for the node and every tool alike. The
// flag package's own messages ("flag provided but not defined: -max-memroy",
// "invalid value "5" for flag -election-timeout: parse error") say neither.

// toolOnly are the names of the tools' flags that a node does not take, with
// what the node takes instead. A user who guesses one (--password,
// ROOKERY_PASSWORD) gets this, never the nearest spelling.
var toolOnly = map[string]string{
	"password": "a node's password is --requirepass (ROOKERY_REQUIREPASS)",
	"cacert":   "a node's CA is --tls-ca (ROOKERY_TLS_CA)",
	"addr":     "a node listens on --resp-addr, --http-addr, --raft-addr and --gossip-addr (ROOKERY_RESP_ADDR, ...)",
}

// toolNames are the tools that read toolOnly's flags and variables.
const toolNames = "the tools (rookery members, status, wait, raft, snapshot, import)"

// valueError is a flag value that does not parse.
type valueError struct {
	name, value, want string
}

func (e *valueError) Error() string { return fmt.Sprintf("--%s %s: %s", e.name, e.value, e.want) }

// flagWatch wraps every value of a FlagSet so that a value that does not
// parse is recorded with what the flag wants.
type flagWatch struct {
	fs     *flag.FlagSet
	failed *valueError
}

// watchFlags wraps fs's values; call it after every flag is defined.
func watchFlags(fs *flag.FlagSet) *flagWatch {
	w := &flagWatch{fs: fs}
	fs.VisitAll(func(f *flag.Flag) {
		v := &checkedValue{Value: f.Value, name: f.Name, w: w}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = &checkedBool{v}
		} else {
			f.Value = v
		}
	})
	return w
}

// checkedValue is a flag value whose parse errors say what it wants.
type checkedValue struct {
	flag.Value
	name string
	w    *flagWatch
}

func (v *checkedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err == nil {
		return nil
	}
	ve := &valueError{name: v.name, value: s, want: wantOf(v.Value, s, err)}
	v.w.failed = ve
	return ve
}

// Get is the value's own Get, as flag.Getter has it (nil if it has none).
func (v *checkedValue) Get() any {
	if g, ok := v.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

// checkedBool is a checkedValue of a boolean flag, which takes no argument.
type checkedBool struct{ *checkedValue }

func (b *checkedBool) IsBoolFlag() bool { return true }

// wantOf says what a flag of v's type wants, given the value s it refused.
func wantOf(v flag.Value, s string, err error) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case time.Duration:
		if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			return "a duration needs a unit, such as " + strings.TrimSpace(s) + "s or 500ms (ns, us, ms, s, m, h)"
		}
		return "want a duration with a unit, such as 5s or 500ms (ns, us, ms, s, m, h)"
	case bool:
		return "want true or false"
	case int, int64:
		return "want a whole number"
	case uint, uint64:
		return "want a whole number, 0 or more"
	case float64:
		return "want a number, such as 0.01"
	}
	return err.Error()
}

// explain turns an error of fs.Parse(args) into one that says what to do.
func (w *flagWatch) explain(args []string, err error) error {
	if w.failed != nil {
		ve := w.failed
		w.failed = nil
		return ve
	}
	name, missing := scanFlags(w.fs, args)
	switch {
	case missing != nil:
		want := "a value"
		if g, ok := missing.Value.(flag.Getter); ok {
			if _, ok := g.Get().(time.Duration); ok {
				want = "a duration, such as 5s or 500ms"
			}
		}
		return fmt.Errorf("--%s needs %s", missing.Name, want)
	case name != "":
		return unknownFlagError(w.fs, name)
	}
	return err
}

// unknownFlagError names the flag meant, where one is close enough.
func unknownFlagError(fs *flag.FlagSet, name string) error {
	if fs.Lookup("requirepass") != nil {
		if what, ok := toolOnly[name]; ok {
			return fmt.Errorf("unknown flag --%s: it is a flag of %s, not of a node: %s", name, toolNames, what)
		}
	}
	if best := closestFlag(fs, name); best != "" {
		return fmt.Errorf("unknown flag --%s; did you mean --%s?", name, best)
	}
	return fmt.Errorf("unknown flag --%s", name)
}

// closestFlag is the flag of fs nearest to name, "" if none is near: at most
// two edits, or a third of the name's length for long names.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, dist := "", -1
	fs.VisitAll(func(f *flag.Flag) {
		if hiddenFlags[f.Name] {
			return
		}
		if d := editDistance(name, f.Name); dist < 0 || d < dist || d == dist && f.Name < best {
			best, dist = f.Name, d
		}
	})
	if dist < 0 || dist > max(2, len(name)/3) {
		return ""
	}
	return best
}

// scanFlags reads args as the flag package does (a flag's value follows it
// unless it is a boolean or is given with =) and returns the first flag fs
// does not define, or the last flag if its value is missing.
func scanFlags(fs *flag.FlagSet, args []string) (unknown string, missing *flag.Flag) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return "", nil
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, _, hasValue := strings.Cut(name, "=")
		if name == "h" || name == "help" {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			return name, nil
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); (ok && b.IsBoolFlag()) || hasValue {
			continue
		}
		if i+1 == len(args) {
			return "", f
		}
		i++ // its value
	}
	return "", nil
}

// envValueError is the error of a ROOKERY_ variable whose value does not parse.
func envValueError(env, value string, err error) error {
	var ve *valueError
	if errors.As(err, &ve) {
		return fmt.Errorf("%s=%s: %s", env, value, ve.want)
	}
	return fmt.Errorf("%s: %w", env, err)
}
