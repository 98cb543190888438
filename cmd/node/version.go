package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/cmd/node/internal/command"
)

// commit is the commit a build made without Go's VCS stamping
// (-buildvcs=false, a source archive) was built from, set with
// -ldflags "-X main.commit=..."; Go's stamp wins when there is one.
var commit string

// build is what the binary knows of how it was built.
type build struct {
	Version   string
	Commit    string // vcs.revision, "unknown" when built outside a checkout
	Modified  bool   // built from a checkout with uncommitted changes
	GoVersion string
}

// buildOf reads the build from the binary: the version variable (set by
// release builds with -ldflags), the commit Go stamps into it from the
// checkout, and the Go version.
func buildOf() build {
	b := build{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// commit is the commit with "+modified" when the tree had local changes.
func (b build) commit() string {
	if b.Modified {
		return b.Commit + "+modified"
	}
	return b.Commit
}

// versionCommand is `rookery version` (and `rookery --version`). It stays
// with the node: the build it reports is set on package main (-ldflags
// "-X main.commit=...").
func versionCommand() command.Command {
	return command.Command{Name: "version", Synopsis: "print the version, commit and Go version", Run: printVersion}
}

// printVersion prints the build.
func printVersion(args []string, _ func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "rookery: version takes no arguments, got %q\n", args[0])
		return 2
	}
	b := buildOf()
	fmt.Fprintf(stdout, "rookery %s\ncommit  %s\ngo      %s\n", b.Version, b.commit(), b.GoVersion)
	return 0
}

// buildInfoGauge is rookery_build_info: always 1, its labels say which build
// runs, so that a dashboard can tell a half-upgraded cluster.
func buildInfoGauge() prometheus.Collector {
	b := buildOf()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rookery_build_info",
		Help: "The build this node runs: version, commit and Go version; always 1.",
	}, []string{"version", "commit", "go_version"})
	g.WithLabelValues(b.Version, b.commit(), b.GoVersion).Set(1)
	return g
}
