package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestEveryFlagHasAGroup: a flag added to newFlagSet must be placed in a -h
// group (help.go flagGroups) or declared hidden (hiddenFlags), once.
func TestEveryFlagHasAGroup(t *testing.T) {
	fs := newFlagSet(&options{}, io.Discard)
	seen := map[string]string{}
	for _, g := range flagGroups {
		for _, name := range g.flags {
			if fs.Lookup(name) == nil {
				t.Errorf("group %s lists --%s, which newFlagSet does not register", g.name, name)
			}
			if prev, ok := seen[name]; ok {
				t.Errorf("--%s is in groups %s and %s", name, prev, g.name)
			}
			seen[name] = g.name
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := seen[f.Name]; !ok && !hiddenFlags[f.Name] {
			t.Errorf("--%s is in no -h group: add it to flagGroups in help.go, or to hiddenFlags", f.Name)
		}
	})
	var b strings.Builder
	writeHelp(&b)
	fs.VisitAll(func(f *flag.Flag) {
		if shown := strings.Contains(b.String(), "--"+f.Name+" ") || strings.Contains(b.String(), "--"+f.Name+"\n"); shown == hiddenFlags[f.Name] {
			t.Errorf("--%s: shown in -h %v, hidden %v", f.Name, shown, hiddenFlags[f.Name])
		}
	})
}

// TestEveryCommandInHelp: every command of the binary's table has a line
// in -h with its synopsis, or is an alias of one (help, -h, --version); no
// name is taken twice.
func TestEveryCommandInHelp(t *testing.T) {
	var b strings.Builder
	writeHelp(&b)
	seen := map[string]bool{}
	for _, c := range commands() {
		if seen[c.Name] {
			t.Errorf("two commands are named %q", c.Name)
		}
		seen[c.Name] = true
		if c.Run == nil {
			t.Errorf("command %q runs nothing", c.Name)
		}
		switch {
		case c.Synopsis != "":
			if line := fmt.Sprintf("\n  %-10s %s\n", c.Name, c.Synopsis); !strings.Contains(b.String(), line) {
				t.Errorf("-h lacks %q", line)
			}
		case !strings.HasPrefix(c.Name, "-") && c.Name != "help":
			t.Errorf("command %q has no synopsis, so -h does not list it", c.Name)
		}
	}
}

func TestCheckEnviron(t *testing.T) {
	fs := newFlagSet(&options{}, io.Discard)
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"PATH=/bin", "ROOKERY_MAX_MEMORY=1gb", "ROOKERY_TARGET=image", "ROOKERY_TEST_NORACE=1"}, ""},
		{[]string{"ROOKERY_MAX_MEMROY=1gb"}, "unknown environment variable ROOKERY_MAX_MEMROY; did you mean ROOKERY_MAX_MEMORY (--max-memory)?"},
		{[]string{"ROOKERY_REQUIRE_PASS=x"}, "unknown environment variable ROOKERY_REQUIRE_PASS; did you mean ROOKERY_REQUIREPASS (--requirepass)?"},
		{[]string{"ROOKERY_DATADIR=/d"}, "did you mean ROOKERY_DATA_DIR (--data-dir)?"},
	} {
		err := checkEnviron(fs, c.env)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		}
	}
}

func TestSizeBounds(t *testing.T) {
	ok := func(args ...string) error {
		_, err := parseOptions(append([]string{"--dev"}, args...), func(string) (string, bool) { return "", false }, io.Discard)
		return err
	}
	for _, args := range [][]string{{"--max-memory", "auto"}, {"--max-memory", "0"}, {"--max-memory", "1mb"}, {"--max-memory", "64tb"},
		{"--max-item-size", "1kb"}, {"--max-item-size", "1gb"}, {"--max-request-size", "2gb", "--max-request-buffer", "2gb"}, {"--max-request-buffer", "512mb"}} {
		if err := ok(args...); err != nil {
			t.Errorf("%v refused: %v", args, err)
		}
	}
	for _, args := range [][]string{{"--max-memory", "10"}, {"--max-memory", "65tb"}, {"--max-memory", "-1"}, {"--max-item-size", "1023"},
		{"--max-item-size", "2gb"}, {"--max-request-size", "0"}, {"--max-request-buffer", "1tib1"}, {"--max-items", "0"},
		{"--max-capacity", "0"}, {"--trailing-logs", "0"}, {"--snapshot-threshold", "0"}, {"--apply-timeout", "-1s"}} {
		if err := ok(args...); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v, want an error naming %s", args, err, args[0])
		}
	}
}

// TestFilterLayoutFlag: --filter-layout takes our layout or RedisBloom's and
// names itself when given anything else.
func TestFilterLayoutFlag(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	for _, v := range []string{"rookery", "redisbloom"} {
		o, err := parseOptions([]string{"--dev", "--filter-layout", v}, env, io.Discard)
		if err != nil || o.filterLayout != v {
			t.Errorf("--filter-layout %s: %+v %v", v, o, err)
		}
	}
	_, err := parseOptions([]string{"--dev", "--filter-layout", "RedisBloom8"}, env, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--filter-layout must be rookery or redisbloom, got "RedisBloom8"`) {
		t.Errorf("a bad layout: %v", err)
	}
}
