package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// nodeLogs keeps each node's log over its restarts: a process's log starts
// afresh when it restarts, so what it wrote before is saved first.
type nodeLogs struct {
	mu   sync.Mutex
	logs map[string]string
}

// save appends what m has logged since it last started; call it before
// restarting m and once it has stopped for good.
func (l *nodeLogs) save(m *nodeproc.Member) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logs == nil {
		l.logs = map[string]string{}
	}
	if l.logs[m.ID] != "" {
		l.logs[m.ID] += "---- jepsen-lite: restarted ----\n"
	}
	l.logs[m.ID] += m.Logs()
}

// all returns the log of every node saved, removed ones included.
func (l *nodeLogs) all() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.logs))
	for id, s := range l.logs {
		out[id] = s
	}
	return out
}

// histLine is one line of history.jsonl.
type histLine struct {
	Worker  int      `json:"worker"`         // workers from 0; 1000+slot readers pinned to a node, 2000+ reads sent to a paused leader, 3000+slot READONLY readers
	Conn    int      `json:"conn,omitempty"` // the connection of a READONLY reader
	Kind    kind     `json:"kind"`
	Key     string   `json:"key"`
	Item    string   `json:"item,omitempty"`
	Items   []string `json:"items,omitempty"`  // of a load: what the dumped filter held
	Call    int64    `json:"call_ns"`          // since the run began
	Return  int64    `json:"return_ns"`        // when the client had its answer or gave up
	Outcome string   `json:"outcome"`          // ok, fail or unknown
	Result  *bool    `json:"result,omitempty"` // the answer of an ok operation (COUNT: in count)
	Count   *int64   `json:"count,omitempty"`  // the answer of an ok COUNT
	Error   string   `json:"error,omitempty"`  // why a failed or unknown one failed
}

// summary is summary.json.
type summary struct {
	Seed         uint64                  `json:"seed"`
	Nodes        int                     `json:"nodes"`
	Shards       int                     `json:"shards,omitempty"` // above 1: a sharded run
	Workers      int                     `json:"workers"`
	Workload     time.Duration           `json:"workload_ns"`
	Ops          map[kind]map[string]int `json:"ops"` // by kind, then outcome
	Faults       []faultEvent            `json:"faults"`
	FaultsByKind map[string]int          `json:"faults_by_kind"`
	Unavailable  []window                `json:"unavailable"`
	Latency      map[kind]latency        `json:"latency_ms"`   // of ok operations
	Linearizable map[string]string       `json:"linearizable"` // by key: Ok, Illegal or Unknown
	ClientCuts   int64                   `json:"client_connections_cut"`
	Restores     int                     `json:"snapshot_restores"` // snapshots the nodes restored, at restart or installed from the leader
	SlowStops    []string                `json:"slow_shutdowns"`    // files holding the log and stacks of each node that did not exit in time after SIGTERM
	Installs     int                     `json:"snapshot_installs"` // of those, installed from the leader
	Held         map[string]int64        `json:"cuckoo_held"`
	HeldRange    [2]int64                `json:"cuckoo_held_allowed"`
	Transactions [3]int64                `json:"transactions"` // run, aborted by WATCH and retried, of unknown outcome (txns.go)
	Verdict      string                  `json:"verdict"`      // OK or FAILED
	FailedChecks []string                `json:"failed_checks"`
	ExitCode     int                     `json:"exit_code"`
	Problems     []string                `json:"problems"`
	Visualized   map[string]string       `json:"visualizations"` // by key, file name in the directory
	NodeDirs     map[string]string       `json:"node_dirs,omitempty"`
}

// window is a span of at least unavailableAfter in which no operation
// succeeded, in ns since the run began.
type window struct {
	Start int64 `json:"start_ns"`
	End   int64 `json:"end_ns"`
}

// unavailableAfter is the shortest span without a successful operation that
// the summary reports as unavailability.
const unavailableAfter = time.Second

type latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// summarize makes the summary of a run.
func summarize(cfg Config, rep *Report, code int) summary {
	s := summary{Seed: cfg.Seed, Nodes: cfg.Nodes, Shards: cfg.Shards, Workers: cfg.Workers, Workload: rep.WorkloadDuration,
		Ops: map[kind]map[string]int{}, Faults: rep.Events, FaultsByKind: map[string]int{},
		Latency: map[kind]latency{}, Linearizable: map[string]string{}, Held: rep.Held, HeldRange: rep.HeldRange,
		ClientCuts: rep.ClientCuts, Transactions: [3]int64{rep.Transactions, rep.TxAborted, rep.TxUnknown}, Verdict: "OK", FailedChecks: rep.FailedChecks, ExitCode: code, Problems: rep.Problems,
		Visualized: map[string]string{}}
	if !rep.OK || code != exitOK {
		s.Verdict = "FAILED"
	}
	if s.Faults == nil {
		s.Faults = []faultEvent{}
	}
	for _, f := range rep.Events {
		s.FaultsByKind[f.Kind]++
	}
	for _, l := range rep.NodeLogs {
		s.Restores += strings.Count(l, "restored snapshot")
		s.Installs += strings.Count(l, "Installed remote snapshot")
	}
	lat := map[kind][]int64{}
	var okAt []int64
	for _, o := range rep.History {
		if s.Ops[o.kind] == nil {
			s.Ops[o.kind] = map[string]int{}
		}
		s.Ops[o.kind][o.outcome()]++
		if o.outcome() == "ok" {
			lat[o.kind] = append(lat[o.kind], o.ret-o.call)
			okAt = append(okAt, o.ret)
		}
	}
	for k, ds := range lat {
		slices.Sort(ds)
		ms := func(q float64) float64 {
			return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))]) / 1e6
		}
		s.Latency[k] = latency{P50: ms(0.5), P99: ms(0.99), Max: float64(ds[len(ds)-1]) / 1e6}
	}
	// The workload ends when the last operation returns; the nemesis may
	// still be healing its last fault.
	last := int64(0)
	for _, o := range rep.History {
		last = max(last, o.ret)
	}
	s.Unavailable = unavailable(okAt, min(last, int64(rep.WorkloadDuration)))
	for _, k := range rep.Keys {
		s.Linearizable[k.key] = string(k.result)
	}
	return s
}

// unavailable finds the spans of at least unavailableAfter, within [0, end],
// in which no operation succeeded; okAt holds when the successes returned.
func unavailable(okAt []int64, end int64) []window {
	slices.Sort(okAt)
	out := []window{}
	last := int64(0)
	for _, t := range append(okAt, end) {
		if t-last >= int64(unavailableAfter) {
			out = append(out, window{Start: last, End: t})
		}
		last = max(last, t)
	}
	return out
}

// writeArtifacts writes the history, the summary and a visualization of each
// key's history into dir; on a failed run it moves the nodes' data directories
// and writes their logs under dir/nodes/ too.
func writeArtifacts(dir string, cfg Config, rep *Report, code int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s := summarize(cfg, rep, code)
	var errs []error
	errs = append(errs, writeHistory(filepath.Join(dir, "history.jsonl"), rep.History))
	for i, st := range rep.Slow {
		name := fmt.Sprintf("slow-shutdown-%d-%s.log", i+1, st.Node)
		errs = append(errs, os.WriteFile(filepath.Join(dir, name), []byte(st.Log), 0o644))
		s.SlowStops = append(s.SlowStops, name)
	}
	for _, k := range rep.Keys {
		if k.ops == 0 {
			continue
		}
		k.info.AddAnnotations(annotations(rep.Events))
		name := k.key + ".html"
		if err := porcupine.VisualizePath(k.model, k.info, filepath.Join(dir, name)); err != nil {
			errs = append(errs, fmt.Errorf("visualize %s: %w", k.key, err))
			continue
		}
		s.Visualized[k.key] = name
	}
	if s.Verdict != "OK" {
		s.NodeDirs = map[string]string{}
		for id, d := range rep.NodeDirs {
			nd := filepath.Join(dir, "nodes", id)
			if err := os.MkdirAll(nd, 0o755); err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, os.WriteFile(filepath.Join(nd, "node.log"), []byte(rep.NodeLogs[id]), 0o644))
			if err := move(d, filepath.Join(nd, "data")); err != nil {
				errs = append(errs, fmt.Errorf("keep %s's data: %w", id, err))
				continue
			}
			s.NodeDirs[id] = filepath.Join("nodes", id)
		}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644))
	return errors.Join(errs...)
}

func writeHistory(path string, ops []op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, o := range ops {
		l := histLine{Worker: o.client, Conn: o.conn, Kind: o.kind, Key: o.key, Item: o.item, Items: o.items,
			Call: o.call, Return: o.ret, Outcome: o.outcome(), Error: o.err}
		switch {
		case l.Outcome != "ok":
		case o.kind == cfCount || o.kind == cbfCount || o.kind == wcfCount:
			n := o.n
			l.Count = &n
		default:
			out := o.out
			l.Result = &out
		}
		if err := enc.Encode(l); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// annotations mark the faults on the visualization's timeline.
func annotations(events []faultEvent) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, f := range events {
		d := fmt.Sprintf("%s %s", f.Kind, f.Node)
		if f.Leader {
			d += " (leader)"
		}
		out = append(out, porcupine.Annotation{Tag: "nemesis", Start: f.Start, End: f.End, Description: d,
			Details: f.Err, BackgroundColor: "#f4cccc"})
	}
	return out
}

// move renames from to to, or copies it where a rename cannot (another file
// system), leaving out the node's ballast file.
func move(from, to string) error {
	if err := os.Rename(from, to); err == nil {
		return nil
	}
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if d.Name() == "ballast" {
			return nil // the node's reserved disk space (cluster/disk.go): no evidence in it
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	return err
}
