package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// flagGroups orders the node's flags in -h as Consul and CockroachDB do, by
// what an operator is deciding. Every flag of newFlagSet is in exactly one
// group or in hiddenFlags (TestEveryFlagHasAGroup).
var flagGroups = []struct {
	name  string
	flags []string
}{
	{"Node", []string{"id", "data-dir", "dev", "log-level"}},
	{"Addresses", []string{"resp-addr", "resp-advertise", "http-addr", "http-advertise",
		"raft-addr", "raft-advertise", "gossip-addr", "gossip-advertise"}},
	{"Cluster", []string{"bootstrap-expect", "join", "shards", "replicas", "dead-server-timeout", "leave-on-terminate", "read-consistency"}},
	{"Filters", []string{"filter-layout"}},
	{"Limits", []string{"max-memory", "max-item-size", "max-items", "max-capacity", "max-clients",
		"max-request-size", "max-request-buffer", "auth-timeout", "timeout"}},
	{"Security", []string{"requirepass", "aclfile", "gossip-key", "tls-ca", "tls-cert", "tls-key", "resp-tls", "http-tls",
		"tls-client-auth", "insecure", "metrics-public"}},
	{"Tuning", []string{"heartbeat-timeout", "election-timeout", "leader-lease-timeout", "commit-timeout",
		"snapshot-threshold", "snapshot-interval", "trailing-logs", "apply-timeout"}},
	{"Debugging", []string{"pprof"}},
}

// hiddenFlags are left out of -h: flags for tests only. They still work, from
// the command line and the environment.
var hiddenFlags = map[string]bool{
	"fault-injection": true,
	"max-log-format":  true,
	"mutant":          true, // only in a build with -tags rookery_mutants
}

// flagArg names what a flag takes, where its type says too little.
var flagArg = map[string]string{
	"max-memory": "size", "max-item-size": "size", "max-request-size": "size", "max-request-buffer": "size",
	"auth-timeout": "duration", "timeout": "duration", "data-dir": "path", "tls-ca": "file", "tls-cert": "file",
	"tls-key": "file", "join": "host:port,...", "log-level": "level", "read-consistency": "level", "filter-layout": "layout",
}

// envName is the environment variable of flag name.
func envName(name string) string {
	return "ROOKERY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// writeHelp writes the node's help: usage, the commands, then each group of
// flags with its environment variable and default.
func writeHelp(w io.Writer) {
	fs := newFlagSet(&options{}, io.Discard)
	var b strings.Builder
	b.WriteString(`Usage: rookery [flags]             run a node
       rookery <command> [args]   run one of the commands

Commands:
`)
	for _, c := range commands() {
		if c.Synopsis != "" {
			fmt.Fprintf(&b, "  %-10s %s\n", c.Name, c.Synopsis)
		}
	}
	b.WriteString(`
Run 'rookery <command> -h' for a command's flags. Every flag below can also be
set in the environment as ROOKERY_<FLAG>; the command line wins.

  -h, --help    this help
  --version     print the version, commit and Go version
`)
	for _, g := range flagGroups {
		fmt.Fprintf(&b, "\n%s:\n", g.name)
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil && !hiddenFlags[name] {
				writeFlag(&b, f)
			}
		}
	}
	_, _ = io.WriteString(w, b.String())
}

// writeFlag writes one flag: its name, argument, environment variable and
// default on one line, its usage wrapped below.
func writeFlag(b *strings.Builder, f *flag.Flag) {
	arg, usage := flag.UnquoteUsage(f)
	if a, ok := flagArg[f.Name]; ok {
		arg = a
	}
	head := "--" + f.Name
	if arg != "" {
		head += " " + arg
	}
	meta := envName(f.Name)
	if f.DefValue != "" && f.DefValue != "false" {
		meta += ", default " + f.DefValue
	}
	fmt.Fprintf(b, "  %-32s [%s]\n", head, meta)
	line := "       "
	for _, word := range strings.Fields(usage) {
		if len(line)+1+len(word) > 79 && len(line) > 7 {
			b.WriteString(line + "\n")
			line = "       "
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
}
