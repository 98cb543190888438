package cluster

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/atomicfile"
	"github.com/rookerydb/rookery/internal/logengine"
)

// Recovering a node whose log is damaged (see store.go for how damage is
// found). Two ways, both run while the node is stopped (`rookery recover`):
//
//   - Rejoin (Recover): the damaged log and snapshots are moved aside and a
//     marker (RejoinFile) lists the peers from the node's last configuration.
//     Started again, the node first has the leader remove it from the
//     configuration, and only then starts Raft on an empty log, so that it
//     joins as a new member, installs a snapshot from the leader and is
//     promoted once caught up. A voter that forgot its log must not vote
//     before that: it could elect a leader that lacks writes it had
//     acknowledged.
//   - Truncate: the entries from the damaged one on are deleted, losing what
//     they held (counted before anything is deleted). For a single node, or
//     when no peer holds the log any more.

// RejoinFile, in a data directory, asks the node to rejoin its cluster as a new
// member before it starts Raft (written by Recover).
const RejoinFile = "rejoin.json"

// Rejoin is the content of RejoinFile.
type Rejoin struct {
	Reason string    `json:"reason"`
	Moved  string    `json:"moved"` // where the damaged log and snapshots went
	Peers  []Peer    `json:"peers"`
	At     time.Time `json:"at"`
}

// Peer is a member of the configuration: its id and Raft address.
type Peer struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
}

// ErrInUse reports a data directory a running node holds.
var ErrInUse = errors.New("the data directory is in use: stop the node first")

func openSnapshots(dataDir string) (raft.SnapshotStore, error) {
	return newSnapStore(dataDir, 2, slog.New(slog.DiscardHandler))
}

// CheckDataDir verifies the log of a stopped node's data directory the way the
// node does at start: nil, or a *LogDamage.
func CheckDataDir(dataDir, id string) error {
	store, err := openOffline(dataDir)
	if err != nil {
		return err
	}
	defer store.close()
	snaps, err := openSnapshots(dataDir)
	if err != nil {
		return err
	}
	sc, err := scanLog(store, id)
	if errors.Is(err, logengine.ErrDamaged) {
		return &LogDamage{DataDir: dataDir, Reason: err.Error()}
	}
	if err != nil || len(sc.damaged) == 0 {
		return err
	}
	newest := uint64(0)
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		newest = metas[0].Index
	}
	for _, d := range sc.damaged {
		if d > newest {
			dmg := &LogDamage{DataDir: dataDir, Index: d, First: sc.first, Last: sc.last, Reason: sc.reasons[d], SoleVoter: sc.soleVoter}
			dmg.Entries, dmg.Writes, dmg.Unreadable = countFrom(store, d, sc.last)
			return dmg
		}
	}
	return nil
}

// Recover moves the log and snapshots of a stopped node's data directory
// aside and writes RejoinFile with the peers of its last configuration. It
// refuses when the configuration has no other voter to recover from.
func Recover(dataDir, id, reason string) (*Rejoin, error) {
	store, err := openOffline(dataDir)
	if err != nil {
		return nil, err
	}
	defer store.close()
	sc, err := scanLog(store, id)
	unbounded := errors.Is(err, logengine.ErrDamaged)
	if err != nil && !unbounded {
		return nil, err
	}
	var conf raft.Configuration
	var confIndex uint64
	if !unbounded {
		conf, confIndex = sc.lastConf, sc.lastConfIndex
	}
	if snaps, err := openSnapshots(dataDir); err == nil {
		if metas, err := snaps.List(); err == nil && len(metas) > 0 && metas[0].ConfigurationIndex > confIndex {
			conf = metas[0].Configuration
		}
	}
	rj := &Rejoin{Reason: reason, At: time.Now().UTC()}
	for _, s := range conf.Servers {
		if string(s.ID) != id && s.Suffrage == raft.Voter {
			rj.Peers = append(rj.Peers, Peer{ID: string(s.ID), Raft: string(s.Address)})
		}
	}
	if len(rj.Peers) == 0 && unbounded {
		// No configuration readable: the node's members file names the
		// members of its last configuration.
		var book peerBook
		if err := book.load(store.dataDir); err == nil {
			for _, p := range book.get().Peers {
				if p.ID != id && p.Raft != "" {
					rj.Peers = append(rj.Peers, Peer{ID: p.ID, Raft: p.Raft})
				}
			}
		}
	}
	if len(rj.Peers) == 0 {
		return nil, fmt.Errorf("%s holds no configuration with another voter to rejoin from: restore a backup, or truncate the log (rookery recover --truncate-at)", dataDir)
	}
	rj.Moved = filepath.Join(dataDir, "damaged-"+rj.At.Format("20060102T150405Z"))
	if err := os.MkdirAll(rj.Moved, 0o755); err != nil {
		return nil, err
	}
	// The log goes aside as a file of its stored entries (logFileAside),
	// and out of the engine.
	if err := writeLogAside(store.Log, filepath.Join(rj.Moved, logAside)); err != nil {
		return nil, fmt.Errorf("move the log aside: %w", err)
	}
	if err := store.cut(0); err != nil {
		return nil, fmt.Errorf("remove the damaged log: %w", err)
	}
	for _, name := range []string{"snapshots"} {
		from := filepath.Join(dataDir, name)
		if _, err := os.Stat(from); err != nil {
			continue
		}
		if err := os.Rename(from, filepath.Join(rj.Moved, name)); err != nil {
			return nil, fmt.Errorf("move %s aside: %w", from, err)
		}
	}
	b, _ := json.MarshalIndent(rj, "", "  ")
	if err := atomicfile.Write(filepath.Join(dataDir, RejoinFile), b, 0o644); err != nil {
		return nil, err
	}
	return rj, nil
}

// Truncation is what Truncate deleted.
type Truncation struct {
	From, To            uint64 // the entries deleted
	Entries, Writes     int
	Unreadable          int
	ByKey               map[string]int // writes per key, of the entries that decoded
	Remaining, Snapshot uint64         // the log's new last index; the newest snapshot's
}

// Truncate deletes the entries of a stopped node's log from index from on,
// and reports what they held. The entries the newest snapshot covers need no
// truncation: the node drops damaged ones itself.
func Truncate(dataDir string, from uint64) (*Truncation, error) {
	store, err := openOffline(dataDir)
	if err != nil {
		return nil, err
	}
	defer store.close()
	first, _ := store.FirstIndex()
	last, err := store.LastIndex()
	if err != nil {
		return nil, err
	}
	if from < first || from > last || last == 0 {
		return nil, fmt.Errorf("index %d is not in the log (%d..%d)", from, first, last)
	}
	t := &Truncation{From: from, To: last, ByKey: map[string]int{}}
	if snaps, err := openSnapshots(dataDir); err == nil {
		if metas, err := snaps.List(); err == nil && len(metas) > 0 {
			t.Snapshot = metas[0].Index
		}
	}
	if from <= t.Snapshot {
		return nil, fmt.Errorf("entry %d is covered by the snapshot at %d: the node drops damaged entries a snapshot covers by itself; truncate after %d if anything", from, t.Snapshot, t.Snapshot)
	}
	for i := from; i <= last; i++ {
		t.Entries++
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil || l.Index != i {
			t.Unreadable++
			continue
		}
		if l.Type != raft.LogCommand {
			continue
		}
		_, cmds, err := fsm.DecodeEntry(l.Data)
		if err != nil {
			t.Unreadable++
			continue
		}
		for _, c := range cmds {
			t.Writes++
			t.ByKey[c.Key]++
		}
	}
	if err := store.cut(from); err != nil {
		return nil, fmt.Errorf("truncate %d..%d: %w", from, last, err)
	}
	t.Remaining = from - 1
	return t, nil
}

// Keys lists the keys a truncation touched, most writes first.
func (t *Truncation) Keys() []string {
	keys := make([]string, 0, len(t.ByKey))
	for k := range t.ByKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if t.ByKey[keys[i]] != t.ByKey[keys[j]] {
			return t.ByKey[keys[i]] > t.ByKey[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// readRejoin returns the marker of dataDir, or nil if there is none.
func readRejoin(dataDir string) (*Rejoin, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, RejoinFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rj Rejoin
	if err := json.Unmarshal(b, &rj); err != nil {
		return nil, fmt.Errorf("%s: %w", RejoinFile, err)
	}
	return &rj, nil
}

// Lost quorum. When a majority of the voters is gone for good, no leader can
// be elected and no configuration change can commit: the configuration must be
// rewritten on the survivors while they are stopped (RecoverPeers), as
// Consul's peers.json does through raft.RecoverCluster. The survivor's state
// is its whole log, applied: writes it holds that were never committed become
// committed, and writes only the lost voters held are gone. A write the
// cluster acknowledged reached a majority, so with one of three voters left it
// is on the survivor only if that survivor was in the majority that
// acknowledged it; recovering the survivor with the longest log keeps the most.

// RecoveryPeer is one server of the configuration RecoverPeers writes. Raft
// may be empty when the server is in the node's last configuration.
type RecoveryPeer struct {
	ID       string `json:"id"`
	Raft     string `json:"address"`
	NonVoter bool   `json:"non_voter,omitempty"`
}

// Recovered is what RecoverPeers did.
type Recovered struct {
	Previous []RecoveryPeer // the last configuration the node held
	Servers  []RecoveryPeer // the configuration now
	// Index and Term of the snapshot that now holds the node's whole state
	// (every entry of its log applied); the new configuration follows it.
	Index, Term uint64
	Filters     int
}

// ErrNotInPeers reports a recovery configuration without the node itself as a
// voter: started on it, the node could never lead.
var ErrNotInPeers = errors.New("the new configuration does not have this node as a voter")

// RecoverPeers rewrites the Raft configuration of a stopped node's data
// directory to peers: it applies the whole log to a state machine, stores the
// result as a snapshot, and appends the new configuration, so that the node,
// started as before, holds elections among peers alone. self is the node's id,
// which must be a voter of peers.
func RecoverPeers(dataDir, self string, peers []RecoveryPeer) (*Recovered, error) {
	if len(peers) == 0 {
		return nil, errors.New("no peers given")
	}
	store, err := openOffline(dataDir)
	if err != nil {
		return nil, err
	}
	defer store.close()
	snaps, err := openSnapshots(dataDir)
	if err != nil {
		return nil, err
	}
	sc, err := scanLog(store, self)
	if err != nil {
		return nil, err
	}
	prev := sc.lastConf
	if metas, err := snaps.List(); err == nil && len(metas) > 0 && metas[0].ConfigurationIndex > sc.lastConfIndex {
		prev = metas[0].Configuration
	}
	known := map[string]string{}
	rc := &Recovered{}
	for _, s := range prev.Servers {
		known[string(s.ID)] = string(s.Address)
		rc.Previous = append(rc.Previous, RecoveryPeer{ID: string(s.ID), Raft: string(s.Address), NonVoter: s.Suffrage != raft.Voter})
	}
	var conf raft.Configuration
	seen := map[string]bool{}
	selfVoter := false
	for _, p := range peers {
		if p.ID == "" {
			return nil, errors.New("a peer without an id")
		}
		if seen[p.ID] {
			return nil, fmt.Errorf("peer %s given twice", p.ID)
		}
		seen[p.ID] = true
		if p.Raft == "" {
			p.Raft = known[p.ID]
		}
		if p.Raft == "" {
			return nil, fmt.Errorf("peer %s is not in the node's last configuration: give its raft address as %s=HOST:PORT", p.ID, p.ID)
		}
		if p.ID == self && !p.NonVoter {
			selfVoter = true
		}
		suffrage := raft.Voter
		if p.NonVoter {
			suffrage = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: suffrage, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Raft)})
		rc.Servers = append(rc.Servers, p)
	}
	if !selfVoter {
		return nil, fmt.Errorf("%w (%s): list it in the peers, or give its id with --id", ErrNotInPeers, self)
	}
	rconf := raft.DefaultConfig()
	rconf.LocalID = raft.ServerID(self)
	rconf.Logger = newHCLogger("raft", slog.New(slog.DiscardHandler))
	f := fsm.New(fsm.Options{Logger: slog.New(slog.DiscardHandler)})
	_, trans := raft.NewInmemTransport(raft.ServerAddress(self))
	defer trans.Close()
	if err := raft.RecoverCluster(rconf, f, store, store, snaps, trans, conf); err != nil {
		return nil, fmt.Errorf("recover the configuration of %s: %w", dataDir, err)
	}
	if h := f.Halted(); h != nil {
		return nil, fmt.Errorf("recover %s: the log holds an entry the state machine cannot apply (%v); the configuration was rewritten all the same, but the node will halt at it", dataDir, h)
	}
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		rc.Index, rc.Term = metas[0].Index, metas[0].Term
	}
	rc.Filters = f.Len()
	// A shard's survivor has the cluster fence off whom this recovery left
	// out once it runs the group again (fence.go).
	if err := writeRecoveryMark(dataDir, rc.Previous, rc.Servers); err != nil {
		return nil, fmt.Errorf("recovered %s, but could not record whom the recovery left out: %w", dataDir, err)
	}
	return rc, nil
}

// logAside is the file Recover writes the moved log to, in the directory it
// moves the snapshots to.
const logAside = "raft-log.bin"

// writeLogAside writes every stored entry of l, as stored (damaged ones
// too), to path: per entry its index (8 bytes, big-endian), the length of
// its value (4 bytes) and the value (logengine's encoding).
func writeLogAside(l *logengine.Log, path string) error {
	// A log whose bounds are damaged has nothing readable to write.
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	return atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		var head [12]byte
		for i := first; i <= last && last > 0; i++ {
			v, err := l.Stored(i)
			if err != nil {
				continue
			}
			binary.BigEndian.PutUint64(head[:8], i)
			binary.BigEndian.PutUint32(head[8:], uint32(len(v)))
			bw.Write(head[:])
			bw.Write(v)
		}
		return bw.Flush()
	})
}
