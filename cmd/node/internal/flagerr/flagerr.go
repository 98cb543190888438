// Package flagerr makes the errors of a flag.FlagSet say what to do, for the
// node and every tool alike: an unknown flag gets the closest known one, a
// value that does not parse gets what the flag wants (a duration's units, a
// whole number, true or false), a flag at the end without its value says
// what value it needs. The flag package's own messages ("flag provided but
// not defined: -max-memroy", "invalid value "5" for flag -election-timeout:
// parse error") say neither.
//
//	w := flagerr.Watch(fs) // after every flag is defined
//	if err := fs.Parse(args); err != nil {
//		return w.Explain(args, err)
//	}
package flagerr

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ValueError is a flag value that does not parse, with what the flag wants.
type ValueError struct {
	Name, Value, Want string
}

func (e *ValueError) Error() string { return fmt.Sprintf("--%s %s: %s", e.Name, e.Value, e.Want) }

// Watcher wraps every value of a FlagSet so that a value that does not
// parse is recorded with what the flag wants, and explains the FlagSet's
// parse errors.
type Watcher struct {
	fs     *flag.FlagSet
	failed *ValueError
	// Hidden are flags never offered as the one meant (flags for tests).
	Hidden map[string]bool
	// Elsewhere, when set, is asked first about an unknown flag: a non-nil
	// answer is the error (a flag of another command, say, and what this one
	// takes instead).
	Elsewhere func(name string) error
}

// Watch wraps fs's values; call it after every flag is defined.
func Watch(fs *flag.FlagSet) *Watcher {
	w := &Watcher{fs: fs}
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
	w    *Watcher
}

func (v *checkedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err == nil {
		return nil
	}
	ve := &ValueError{Name: v.name, Value: s, Want: wantOf(v.Value, s, err)}
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

// Explain turns an error of fs.Parse(args) into one that says what to do.
func (w *Watcher) Explain(args []string, err error) error {
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
		return w.unknown(name)
	}
	return err
}

// unknown names the flag meant, where one is close enough.
func (w *Watcher) unknown(name string) error {
	if w.Elsewhere != nil {
		if err := w.Elsewhere(name); err != nil {
			return err
		}
	}
	// --json, --text: a value of --format given as a flag of its own.
	if f := w.fs.Lookup("format"); f != nil && (name == "json" || name == "text") {
		return fmt.Errorf("unknown flag --%s; did you mean --format %s?", name, name)
	}
	if best := w.closest(name); best != "" {
		return fmt.Errorf("unknown flag --%s; did you mean --%s?", name, best)
	}
	return fmt.Errorf("unknown flag --%s", name)
}

// closest is the flag nearest to name, "" if none is near: at most two
// edits, or a third of the name's length for long names.
func (w *Watcher) closest(name string) string {
	var names []string
	w.fs.VisitAll(func(f *flag.Flag) {
		if !w.Hidden[f.Name] {
			names = append(names, f.Name)
		}
	})
	return Closest(name, names)
}

// Closest is the one of names nearest to name, "" if none is near: at most
// two edits, or a third of name's length for long names. Ties go to the
// first in alphabetical order.
func Closest(name string, names []string) string {
	best, dist := "", -1
	for _, n := range names {
		if d := Distance(name, n); dist < 0 || d < dist || d == dist && n < best {
			best, dist = n, d
		}
	}
	if dist < 0 || dist > max(2, len(name)/3) {
		return ""
	}
	return best
}

// UnknownCommand is the error of a command name that is not one of names,
// with the closest of them when one is near: `unknown command "membrs";
// did you mean members?`.
func UnknownCommand(name string, names []string) error {
	if best := Closest(name, names); best != "" {
		return fmt.Errorf("unknown command %q; did you mean %s?", name, best)
	}
	return fmt.Errorf("unknown command %q", name)
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

// EnvValueError is the error of an environment variable (ROOKERY_<FLAG>)
// whose value does not parse: err is what Set of a watched flag returned.
func EnvValueError(env, value string, err error) error {
	var ve *ValueError
	if errors.As(err, &ve) {
		return fmt.Errorf("%s=%s: %s", env, value, ve.Want)
	}
	return fmt.Errorf("%s: %w", env, err)
}

// Distance is the Levenshtein distance of a and b.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
