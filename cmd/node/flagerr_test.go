package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runBin runs the binary with args and env entries added to this process's
// environment (less any ROOKERY_ variable), and returns its exit code, stdout
// and stderr. It is for commands that end by themselves: one still running
// after a minute (a node that started when it should have refused) is killed.
func runBin(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROOKERY_") || strings.HasPrefix(kv, "ROOKERY_TEST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// TestFlagErrorsSayWhatToDo is issue 19's point 5, as the operator met it: an
// unknown flag gets the one meant, a value that does not parse gets the units
// or the values the flag takes, on the command line and in the environment.
func TestFlagErrorsSayWhatToDo(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--max-memroy", "1gb"}, "unknown flag --max-memroy; did you mean --max-memory?"},
		{nil, []string{"--dev", "-bootstrap-expekt", "1"}, "unknown flag --bootstrap-expekt; did you mean --bootstrap-expect?"},
		{nil, []string{"--election-timeout", "5"}, "--election-timeout 5: a duration needs a unit, such as 5s or 500ms"},
		{nil, []string{"--heartbeat-timeout=soon"}, "--heartbeat-timeout soon: want a duration with a unit, such as 5s or 500ms"},
		{nil, []string{"--dev", "--log-level", "verbose"}, "--log-level verbose: want debug, info, warn or error"},
		{nil, []string{"--max-items", "many"}, "--max-items many: want a whole number"},
		{nil, []string{"--dev=maybe"}, "--dev maybe: want true or false"},
		{nil, []string{"--password", "x"}, "unknown flag --password: it is a flag of the tools"},
		{nil, []string{"--user", "x"}, "unknown flag --user: it is a flag of the tools (rookery members, status, wait, raft, snapshot, import, migrate), not of a node: a node's users are made with ACL SETUSER"},
		{[]string{"ROOKERY_USER=x"}, []string{"--dev"}, "environment variable ROOKERY_USER is read by the tools"},
		{nil, []string{"--dev", "--election-timeout"}, "--election-timeout needs a duration, such as 5s or 500ms"},
		{[]string{"ROOKERY_ELECTION_TIMEOUT=5"}, []string{"--dev"}, "ROOKERY_ELECTION_TIMEOUT=5: a duration needs a unit, such as 5s or 500ms"},
	} {
		code, _, errOut := runBin(t, c.env, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v %v: exit %d, want 1 and %q in:\n%s", c.env, c.args, code, c.want, errOut)
		}
		if strings.Contains(errOut, "flag provided but not defined") || strings.Contains(errOut, "parse error") {
			t.Errorf("%v: the flag package's own words remain:\n%s", c.args, errOut)
		}
	}
	// The password flag's answer names what a node takes instead.
	if _, _, errOut := runBin(t, nil, "--password", "x"); !strings.Contains(errOut, "--requirepass") {
		t.Errorf("--password on a node:\n%s", errOut)
	}
	// A tool's flags get the same help.
	code, _, errOut := runBin(t, nil, "members", "--adr", "127.0.0.1:1")
	if code != 2 || !strings.Contains(errOut, "unknown flag --adr; did you mean --addr?") {
		t.Errorf("members --adr: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runBin(t, nil, "wait", "--timeout", "30")
	if code != 2 || !strings.Contains(errOut, "--timeout 30: a duration needs a unit, such as 30s or 500ms") {
		t.Errorf("wait --timeout 30: exit %d\n%s", code, errOut)
	}
}

// TestCredentialVariables is issue 19's point 4: ROOKERY_PASSWORD, a natural
// guess, never draws a suggestion to turn security off; the node says the
// tools read it and what the node takes instead. A credential-like name the
// node does not know is pointed at a credential, not at --insecure.
func TestCredentialVariables(t *testing.T) {
	code, _, errOut := runBin(t, []string{"ROOKERY_PASSWORD=x"}, "--dev")
	if code != 1 || strings.Contains(errOut, "INSECURE") || strings.Contains(errOut, "--insecure") ||
		!strings.Contains(errOut, "ROOKERY_PASSWORD is read by the tools") || !strings.Contains(errOut, "--requirepass (ROOKERY_REQUIREPASS)") {
		t.Errorf("ROOKERY_PASSWORD: exit %d\n%s", code, errOut)
	}
	for _, name := range []string{"ROOKERY_PASSWD", "ROOKERY_SECURE_PASS", "ROOKERY_INSECURE_TOKEN", "ROOKERY_AUTH"} {
		code, _, errOut := runBin(t, []string{name + "=x"}, "--dev")
		if code != 1 || !strings.Contains(errOut, "unknown environment variable "+name) ||
			strings.Contains(errOut, "ROOKERY_INSECURE (") || strings.Contains(errOut, "ROOKERY_METRICS_PUBLIC") {
			t.Errorf("%s: exit %d\n%s", name, code, errOut)
		}
	}
	if _, _, errOut := runBin(t, []string{"ROOKERY_PASSWD=x"}, "--dev"); !strings.Contains(errOut, "did you mean ROOKERY_REQUIREPASS (--requirepass)?") {
		t.Errorf("ROOKERY_PASSWD:\n%s", errOut)
	}
	// A switch's own misspelling still finds it.
	if _, _, errOut := runBin(t, []string{"ROOKERY_INSECUR=1"}, "--dev"); !strings.Contains(errOut, "did you mean ROOKERY_INSECURE (--insecure)?") {
		t.Errorf("ROOKERY_INSECUR:\n%s", errOut)
	}
}

// FuzzFlagErrors: whatever the command line, parsing the node's flags never
// panics, and a refused command line gets an error that names a flag.
func FuzzFlagErrors(f *testing.F) {
	for _, seed := range []string{"--max-memroy\x001gb", "--election-timeout\x005", "--dev=maybe", "-h", "--\x00x",
		"--log-level", "--join=a,b\x00--bootstrap-expect\x00-1", "---x", "-", "--password\x00p"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		o := &options{}
		fs := newFlagSet(o, io.Discard)
		watch := watchFlags(fs)
		err := fs.Parse(args)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			return
		}
		if msg := watch.Explain(args, err).Error(); !strings.Contains(msg, "-") {
			t.Errorf("%q: %q names no flag", args, msg)
		}
	})
}

// TestDidYouMeanCommands is issue 29's point 6: a mistyped command or
// subcommand gets the one meant, and --json, which no tool takes, points at
// --format json where a tool has --format.
func TestDidYouMeanCommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"membrs"}, `rookery: unknown command "membrs"; did you mean members?`},
		{[]string{"snapshto", "save", "x"}, `unknown command "snapshto"; did you mean snapshot?`},
		{[]string{"raft", "list-peer"}, `rookery raft: unknown command "list-peer"; did you mean list-peers?`},
		{[]string{"snapshot", "sav", "x"}, `rookery snapshot sav: unknown command "sav"; did you mean save?`},
		{[]string{"tls", "inti"}, `rookery tls: unknown command "inti"; did you mean init?`},
		{[]string{"node", "drian", "n1"}, `rookery node: unknown command "drian"; did you mean drain?`},
		{[]string{"members", "--json"}, "unknown flag --json; did you mean --format json?"},
		{[]string{"status", "--json"}, "unknown flag --json; did you mean --format json?"},
		{[]string{"shards", "--jsno"}, "unknown flag --jsno"},
		{[]string{"import", "--key", "k", "--json"}, "unknown flag --json"},
		{[]string{"import", "--key", "k", "--chunks", "10"}, "unknown flag --chunks; did you mean --chunk?"},
		{[]string{"snapshot", "save", "--stael", "x"}, "unknown flag --stael; did you mean --stale?"},
	} {
		code, _, errOut := runBin(t, nil, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("rookery %v: exit %d, want 2 and %q in:\n%s", c.args, code, c.want, errOut)
		}
		if strings.Contains(errOut, "flag provided but not defined") {
			t.Errorf("rookery %v: the flag package's own words remain:\n%s", c.args, errOut)
		}
	}
	// Nothing near: no guess.
	if _, _, errOut := runBin(t, nil, "frobnicate"); !strings.Contains(errOut, `unknown command "frobnicate"`) || strings.Contains(errOut, "did you mean") {
		t.Errorf("rookery frobnicate:\n%s", errOut)
	}
}

// TestZeroShardsAndReplicasRefused is issue 29's point 6: --shards 0 and
// --replicas 0 (or ROOKERY_SHARDS=0, ROOKERY_REPLICAS=0) are refused with
// what they take, instead of silently meaning one group or 3 replicas; an
// empty ROOKERY_SHARDS, as compose writes for one left empty in .env, is
// as if unset.
func TestZeroShardsAndReplicasRefused(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--dev", "--shards", "0"}, "--shards 0: want 1 to 16384 shards; leave --shards out for a cluster of one group on every node"},
		{nil, []string{"--dev", "--shards", "4", "--replicas", "0"}, "--replicas 0: want 1 to 15 replicas of each shard; leave --replicas out for the default, 3"},
		{[]string{"ROOKERY_SHARDS=0"}, []string{"--dev"}, "ROOKERY_SHARDS=0: want 1 to 16384 shards; leave ROOKERY_SHARDS unset (or empty)"},
		{[]string{"ROOKERY_REPLICAS=0"}, []string{"--dev", "--shards", "2"}, "ROOKERY_REPLICAS=0: want 1 to 15 replicas"},
	} {
		code, _, errOut := runBin(t, c.env, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v %v: exit %d, want 1 and %q in:\n%s", c.env, c.args, code, c.want, errOut)
		}
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	o, err := parseOptions([]string{"--dev"}, env(map[string]string{"ROOKERY_SHARDS": "", "ROOKERY_REPLICAS": " "}), io.Discard)
	if err != nil || o.shards != 0 || o.replicas != 0 {
		t.Errorf("empty ROOKERY_SHARDS and ROOKERY_REPLICAS: %+v, %v", o, err)
	}
	o, err = parseOptions([]string{"--dev", "--shards", "3"}, env(nil), io.Discard)
	if err != nil || o.shards != 3 || o.replicas != 0 {
		t.Errorf("--shards 3: %v", err)
	}
}
