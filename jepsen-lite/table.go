package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// table prints, as a Markdown table, one row per summary.json under the
// directories given (each the -out of a run): the table of
// docs/RELIABILITY.md.
//
//	go run ./jepsen-lite table runs/*
//
// Runs of a sharded cluster add a column of shards and count the faults
// that move replicas too.
func table(dirs []string, w io.Writer) error {
	var sums []summary
	sharded := false
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "summary.json"))
		if err != nil {
			return err
		}
		var s summary
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		sums = append(sums, s)
		sharded = sharded || s.Shards > 1
	}
	// A mix is counted as its parts' kinds too.
	faultKinds := slices.DeleteFunc(slices.Clone(allFaults), func(f string) bool {
		return f == faultMix || (!sharded && slices.Contains(shardedOnly, f))
	})
	shardCol, shardSep := "", ""
	if sharded {
		shardCol, shardSep = " shards |", "---|"
	}
	fmt.Fprintf(w, "| seed |%s workload | ok ops | unknown | failed | faults (%s) | leader hit | cuts | snapshots restored (installed) | slow SIGTERM exits | longest unavailable | violations | acked lost | verdict |\n",
		shardCol, strings.Join(faultKinds, "/"))
	fmt.Fprintln(w, "|---|"+shardSep+"---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range sums {
		var ok, unknown, failed int
		for _, by := range s.Ops {
			ok, unknown, failed = ok+by["ok"], unknown+by["unknown"], failed+by["fail"]
		}
		counts := make([]string, len(faultKinds))
		leader := 0
		for i, k := range faultKinds {
			counts[i] = fmt.Sprint(s.FaultsByKind[k])
		}
		for _, f := range s.Faults {
			if f.Leader {
				leader++
			}
		}
		longest := time.Duration(0)
		for _, u := range s.Unavailable {
			longest = max(longest, time.Duration(u.End-u.Start))
		}
		violations, lost := 0, 0
		for _, c := range s.FailedChecks {
			if slices.Contains([]string{checkLinearizable, checkCount, checkReplicas, checkReadOnlyReads, checkWindowed}, c) {
				violations++
			}
			if c == checkAckedKept {
				lost++
			}
		}
		shards := ""
		if sharded {
			shards = fmt.Sprintf(" %d |", max(s.Shards, 1))
		}
		fmt.Fprintf(w, "| %d |%s %v | %d | %d | %d | %s | %d | %d | %d (%d) | %d | %v | %d | %d | %s |\n", s.Seed, shards,
			s.Workload.Round(time.Second), ok, unknown, failed, strings.Join(counts, "/"), leader, s.ClientCuts,
			s.Restores, s.Installs, len(s.SlowStops), longest.Round(100*time.Millisecond), violations, lost, s.Verdict)
	}
	return nil
}
