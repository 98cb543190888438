package flagerr

import (
	"errors"
	"flag"
	"io"
	"testing"
	"time"
)

// toolFlags is a FlagSet as a tool defines one.
func toolFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("rookery tool", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("addr", "", "")
	fs.Duration("timeout", time.Second, "")
	fs.Int("chunk", 1, "")
	fs.Uint64("skip", 0, "")
	fs.Float64("error-rate", 0.01, "")
	fs.Bool("quiet", false, "")
	fs.Bool("fault-injection", false, "")
	return fs
}

// TestExplain: every way a command line goes wrong gets an error that says
// what the flag wants or which flag was meant.
func TestExplain(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--adr", "x"}, "unknown flag --adr; did you mean --addr?"},
		{[]string{"-timout=1s"}, "unknown flag --timout; did you mean --timeout?"},
		{[]string{"--nothing-like-it"}, "unknown flag --nothing-like-it"},
		{[]string{"--fault-injectio"}, "unknown flag --fault-injectio"}, // hidden: never offered
		{[]string{"--password", "x"}, "a flag of elsewhere"},
		{[]string{"--timeout", "30"}, "--timeout 30: a duration needs a unit, such as 30s or 500ms (ns, us, ms, s, m, h)"},
		{[]string{"--timeout", "soon"}, "--timeout soon: want a duration with a unit, such as 5s or 500ms (ns, us, ms, s, m, h)"},
		{[]string{"--timeout"}, "--timeout needs a duration, such as 5s or 500ms"},
		{[]string{"--addr"}, "--addr needs a value"},
		{[]string{"--chunk", "many"}, "--chunk many: want a whole number"},
		{[]string{"--skip", "-1"}, "--skip -1: want a whole number, 0 or more"},
		{[]string{"--error-rate", "low"}, "--error-rate low: want a number, such as 0.01"},
		{[]string{"--quiet=maybe"}, "--quiet maybe: want true or false"},
	} {
		fs := toolFlags()
		w := Watch(fs)
		w.Hidden = map[string]bool{"fault-injection": true}
		w.Elsewhere = func(name string) error {
			if name == "password" {
				return errors.New("a flag of elsewhere")
			}
			return nil
		}
		err := fs.Parse(c.args)
		if err == nil {
			t.Errorf("%q parsed", c.args)
			continue
		}
		if got := w.Explain(c.args, err).Error(); got != c.want {
			t.Errorf("%q: %q, want %q", c.args, got, c.want)
		}
	}
}

// TestWatchKeepsValues: a watched flag still parses, reports itself boolean
// and gives its value.
func TestWatchKeepsValues(t *testing.T) {
	fs := toolFlags()
	Watch(fs)
	if err := fs.Parse([]string{"--quiet", "--timeout", "2s", "--chunk=7", "file"}); err != nil {
		t.Fatal(err)
	}
	if v := fs.Lookup("quiet").Value.(flag.Getter).Get(); v != true {
		t.Errorf("--quiet: %v", v)
	}
	if v := fs.Lookup("timeout").Value.(flag.Getter).Get(); v != 2*time.Second {
		t.Errorf("--timeout: %v", v)
	}
	if v := fs.Lookup("chunk").Value.String(); v != "7" || fs.Arg(0) != "file" {
		t.Errorf("--chunk %s, args %q", v, fs.Args())
	}
}

// TestEnvValueError: a variable's bad value says what the flag wants, named
// as the variable.
func TestEnvValueError(t *testing.T) {
	fs := toolFlags()
	Watch(fs)
	err := fs.Set("timeout", "5")
	if got := EnvValueError("ROOKERY_TIMEOUT", "5", err).Error(); got !=
		"ROOKERY_TIMEOUT=5: a duration needs a unit, such as 5s or 500ms (ns, us, ms, s, m, h)" {
		t.Errorf("%q", got)
	}
	if got := EnvValueError("ROOKERY_X", "y", errors.New("bad")).Error(); got != "ROOKERY_X: bad" {
		t.Errorf("%q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"addr", "addr", 0}, {"adr", "addr", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"max-memroy", "max-memory", 2}} {
		if d := Distance(c.a, c.b); d != c.d || Distance(c.b, c.a) != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}

// TestUnknownCommand: a command name near one of the commands gets it; one
// near none gets no guess.
func TestUnknownCommand(t *testing.T) {
	names := []string{"members", "status", "raft", "shards", "snapshot", "import"}
	for name, want := range map[string]string{
		"membrs":     `unknown command "membrs"; did you mean members?`,
		"stauts":     `unknown command "stauts"; did you mean status?`,
		"snapshots":  `unknown command "snapshots"; did you mean snapshot?`,
		"frobnicate": `unknown command "frobnicate"`,
	} {
		if got := UnknownCommand(name, names).Error(); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestJSONMeansFormat: --json and --text, on a FlagSet with --format, point
// at --format; without one, no guess is made.
func TestJSONMeansFormat(t *testing.T) {
	for _, withFormat := range []bool{true, false} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("addr", "", "")
		if withFormat {
			fs.String("format", "text", "")
		}
		w := Watch(fs)
		args := []string{"--json"}
		err := w.Explain(args, fs.Parse(args))
		want := "unknown flag --json"
		if withFormat {
			want = "unknown flag --json; did you mean --format json?"
		}
		if err == nil || err.Error() != want {
			t.Errorf("format %v: %v, want %q", withFormat, err, want)
		}
	}
}
