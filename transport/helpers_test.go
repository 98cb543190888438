package transport

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// mustNewParser returns a Server used only to parse (no backend).
func mustNewParser(t testing.TB, cfg Config) *Server {
	t.Helper()
	s := New(cfg, nil)
	t.Cleanup(func() { s.Close() })
	return s
}

func toArgs(args ...string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

// parseLine parses a space-separated request on an authenticated session.
func parseLine(s *Server, line string) (op, error) {
	return s.parse(&session{proto: 2, authed: true}, toArgs(strings.Fields(line)...))
}

// renderWrite renders a write's result in the given protocol.
func renderWrite(o op, r *fsm.Result, proto int) string {
	w := reply{proto: proto}
	o.render(&w, r)
	return string(w.b)
}

// renderRead runs a read against q in the given protocol.
func renderRead(o op, q queries, proto int) string {
	w := reply{proto: proto}
	o.read(q, &w)
	return string(w.b)
}

// fakeQueries answers reads from fixed tables.
type fakeQueries struct {
	kinds  map[string]filters.Kind
	infos  map[string]fsm.Info
	exists map[string]bool // item -> present
	count  uint64
	card   uint64
	dump   []byte
}

func (f *fakeQueries) famOK(fam fsm.Family, key string) bool {
	k, ok := f.kinds[key]
	if !ok {
		return false
	}
	switch fam {
	case fsm.FamilyBF:
		return k == filters.KindBloom || k == filters.KindScalable
	case fsm.FamilyCF:
		return k == filters.KindCuckoo
	case fsm.FamilyCBF:
		return k == filters.KindCounting || k == filters.KindDLeft
	}
	return true
}

func (f *fakeQueries) Exists(fam fsm.Family, key string, items [][]byte) []bool {
	out := make([]bool, len(items))
	for i, it := range items {
		out[i] = f.famOK(fam, key) && f.exists[string(it)]
	}
	return out
}

func (f *fakeQueries) Count(fam fsm.Family, key string, item []byte) uint64 {
	if !f.famOK(fam, key) {
		return 0
	}
	return f.count
}

func (f *fakeQueries) Card(key string) (uint64, error) {
	if _, ok := f.kinds[key]; !ok {
		return 0, nil
	}
	if !f.famOK(fsm.FamilyBF, key) {
		return 0, fsm.ErrWrongType
	}
	return f.card, nil
}

func (f *fakeQueries) Info(fam fsm.Family, key string) (fsm.Info, error) {
	if _, ok := f.kinds[key]; !ok {
		return fsm.Info{}, fsm.ErrNotFound
	}
	if !f.famOK(fam, key) {
		return fsm.Info{}, fsm.ErrWrongType
	}
	return f.infos[key], nil
}

func (f *fakeQueries) ScanDump(fam fsm.Family, key string, iter int64) (int64, []byte, error) {
	if _, err := f.Info(fam, key); err != nil {
		return 0, nil, err
	}
	if iter == 0 {
		return 1, f.dump, nil
	}
	return 0, nil, nil
}

func (f *fakeQueries) KindOf(key string) (filters.Kind, bool) {
	k, ok := f.kinds[key]
	return k, ok
}

// Expiry: the fake's keys have no deadline (expire_test.go reads real ones).
func (f *fakeQueries) Expiry(key string) (int64, bool) {
	_, ok := f.kinds[key]
	return 0, ok
}

func (f *fakeQueries) Expires() int        { return 0 }
func (f *fakeQueries) ExpiredKeys() uint64 { return 0 }

func (f *fakeQueries) Scan(cursor uint64, count int, match func(string, filters.Kind) bool) (uint64, []string) {
	var keys []string
	for _, k := range sortedKeys(f.kinds) {
		if match(k, f.kinds[k]) {
			keys = append(keys, k)
		}
	}
	return 0, keys
}

func (f *fakeQueries) Len() int            { return len(f.kinds) }
func (f *fakeQueries) MemoryBytes() uint64 { return 0 }
func (f *fakeQueries) MemoryUsage(key string) (uint64, bool) {
	_, ok := f.kinds[key]
	return 4096, ok
}
func (f *fakeQueries) List() []fsm.Info { return nil }

func sortedKeys(m map[string]filters.Kind) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestMain(m *testing.M) {
	// Keep test output readable: the servers log connection events and leaves.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}
