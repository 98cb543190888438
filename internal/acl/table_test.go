package acl

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// mustNewRegistry numbers every command of the table, as a server serving
// all of them would.
func mustNewRegistry(t testing.TB) *Registry {
	t.Helper()
	var names []string
	for _, c := range Commands() {
		names = append(names, c.Name)
	}
	r, err := NewRegistry(names)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustID(t testing.TB, r *Registry, name string) int {
	t.Helper()
	id, ok := r.ID(name)
	if !ok {
		t.Fatalf("no command %q", name)
	}
	return id
}

// TestRedisBloomCategorySets checks ACL CAT bloom and ACL CAT cuckoo
// against the exact sets RedisBloom's tests/flow/test_acl.py asserts, and
// its check that bf.exists is in @read.
func TestRedisBloomCategorySets(t *testing.T) {
	r := mustNewRegistry(t)
	bloom := []string{
		"bf.reserve", "bf.add", "bf.madd", "bf.insert", "bf.exists", "bf.mexists",
		"bf.info", "bf.card", "bf.debug", "bf.scandump", "bf.loadchunk",
	}
	cuckoo := []string{
		"cf.reserve", "cf.add", "cf.addnx", "cf.insert", "cf.insertnx", "cf.exists", "cf.mexists",
		"cf.count", "cf.del", "cf.compact", "cf.scandump", "cf.loadchunk", "cf.info", "cf.debug",
	}
	cbf := []string{
		"cbf.reserve", "cbf.add", "cbf.madd", "cbf.del", "cbf.exists", "cbf.mexists", "cbf.count", "cbf.info",
	}
	for _, c := range []struct {
		cat  Category
		want []string
	}{{CatBloom, bloom}, {CatCuckoo, cuckoo}, {CatCBF, cbf}, {CatCMS, nil}, {CatTopK, nil}, {CatTDigest, nil}} {
		got := r.InCategory(c.cat)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("ACL CAT %s = %v, want %v", c.cat, got, want)
		}
	}
	if !slices.Contains(r.InCategory(CatRead), "bf.exists") {
		t.Error("ACL CAT read lacks bf.exists")
	}
	// test_acl_category: the module's categories are listed by ACL CAT.
	for _, name := range []string{"bloom", "cuckoo", "topk", "cms", "tdigest"} {
		if !slices.Contains(CategoryNames(), name) {
			t.Errorf("ACL CAT lacks %s", name)
		}
	}
}

// TestFilterCommandPlacement pins where each filter command sits: BF and CF
// exactly as RedisBloom registers them (rebloom.c), CBF as its
// counterparts. Module commands take no category from their flags in Redis,
// so a RedisBloom read like BF.EXISTS is neither @fast nor @slow.
func TestFilterCommandPlacement(t *testing.T) {
	want := map[string]string{
		"bf.reserve":   "@write @fast @bloom",
		"bf.add":       "@write @bloom",
		"bf.madd":      "@write @bloom",
		"bf.insert":    "@write @bloom",
		"bf.exists":    "@read @bloom",
		"bf.mexists":   "@read @bloom",
		"bf.info":      "@read @fast @bloom",
		"bf.card":      "@read @fast @bloom",
		"bf.debug":     "@read @bloom",
		"bf.scandump":  "@read @bloom",
		"bf.loadchunk": "@write @bloom",
		"cf.reserve":   "@write @fast @cuckoo",
		"cf.add":       "@write @cuckoo",
		"cf.addnx":     "@write @cuckoo",
		"cf.insert":    "@write @cuckoo",
		"cf.insertnx":  "@write @cuckoo",
		"cf.exists":    "@read @cuckoo",
		"cf.mexists":   "@read @cuckoo",
		"cf.count":     "@read @cuckoo",
		"cf.del":       "@write @cuckoo",
		"cf.compact":   "@read @cuckoo",
		"cf.scandump":  "@read @cuckoo",
		"cf.loadchunk": "@write @cuckoo",
		"cf.info":      "@read @fast @cuckoo",
		"cf.debug":     "@read @cuckoo",
		"cbf.reserve":  "@write @fast @cbf",
		"cbf.add":      "@write @cbf",
		"cbf.madd":     "@write @cbf",
		"cbf.del":      "@write @cbf",
		"cbf.exists":   "@read @cbf",
		"cbf.mexists":  "@read @cbf",
		"cbf.count":    "@read @cbf",
		"cbf.info":     "@read @fast @cbf",
		// A few of Redis's own (7.2's commands/*.json and flags).
		"del":         "@keyspace @write @slow",
		"exists":      "@keyspace @read @fast",
		"keys":        "@keyspace @read @slow @dangerous",
		"flushall":    "@keyspace @write @slow @dangerous",
		"client|list": "@admin @slow @dangerous @connection",
		"client|id":   "@slow @connection",
		"auth":        "@fast @connection",
		"multi":       "@fast @transaction",
		"exec":        "@slow @transaction",
		"info":        "@slow @dangerous",
		"role":        "@admin @fast @dangerous",
		"config|get":  "@admin @slow @dangerous",
		"acl|whoami":  "@slow",
		"acl|setuser": "@admin @slow @dangerous",
	}
	for name, cats := range want {
		c, ok := Lookup(name)
		if !ok {
			t.Errorf("no row for %s", name)
			continue
		}
		if got := strings.Join(c.Categories.Flags(), " "); got != cats {
			t.Errorf("%s: %s, want %s", name, got, cats)
		}
	}
}

// TestTableRows checks the table's shape: lower-case names, a container
// for each subcommand, key specs that make sense, and Redis's three no-auth
// commands.
func TestTableRows(t *testing.T) {
	var noauth []string
	for _, c := range Commands() {
		if c.Name != strings.ToLower(c.Name) || strings.ContainsAny(c.Name, " @") {
			t.Errorf("bad name %q", c.Name)
		}
		if base, _, sub := strings.Cut(c.Name, "|"); sub {
			if _, ok := Lookup(base); !ok {
				t.Errorf("%s has no container row", c.Name)
			}
		}
		if c.Categories == 0 || c.Categories>>numCategories != 0 {
			t.Errorf("%s: categories %b", c.Name, c.Categories)
		}
		if !c.Categories.Has(CatFast) && !c.Categories.Has(CatSlow) && !c.Categories.Has(CatBloom) &&
			!c.Categories.Has(CatCuckoo) && !c.Categories.Has(CatCBF) {
			t.Errorf("%s is neither fast nor slow", c.Name)
		}
		for _, k := range c.Keys {
			if k.First < 1 || k.Step < 1 || (k.Last >= 0 && k.Last < k.First) || k.Access&^(KeyRead|KeyWrite) != 0 {
				t.Errorf("%s: bad key spec %+v", c.Name, k)
			}
		}
		if c.NoAuth {
			noauth = append(noauth, c.Name)
		}
	}
	if want := []string{"auth", "hello", "quit"}; !slices.Equal(noauth, want) {
		t.Errorf("no-auth commands %v, want %v", noauth, want)
	}
}

func TestCategoryNames(t *testing.T) {
	redis72 := "keyspace read write set sortedset list hash string bitmap hyperloglog geo stream " +
		"pubsub admin fast slow blocking dangerous connection transaction scripting"
	names := CategoryNames()
	if got := strings.Join(names[:21], " "); got != redis72 {
		t.Errorf("Redis's categories %q, want %q", got, redis72)
	}
	if got := strings.Join(names[21:], " "); got != "bloom cuckoo cms topk tdigest cbf" {
		t.Errorf("module categories %q", got)
	}
	for i, n := range names {
		c, ok := CategoryByName(strings.ToUpper(n))
		if !ok || int(c) != i || c.String() != n {
			t.Errorf("CategoryByName(%q) = %v, %v", n, c, ok)
		}
	}
	if _, ok := CategoryByName("all"); ok {
		t.Error("all is a category")
	}
	if got := Cats(CatBloom, CatRead, CatFast).Flags(); !slices.Equal(got, []string{"@read", "@fast", "@bloom"}) {
		t.Errorf("Flags = %v", got)
	}
}

func TestNewRegistry(t *testing.T) {
	for _, names := range [][]string{
		{"bf.add", "set"},           // no row
		{"bf.add", "bf.add"},        // twice
		{"client|list"},             // no container
		{"client", "client|nosuch"}, // no row
	} {
		if _, err := NewRegistry(names); !errors.Is(err, ErrRegistry) {
			t.Errorf("NewRegistry(%v) = %v, want ErrRegistry", names, err)
		}
	}
	a, err := NewRegistry([]string{"ping", "client|list", "bf.add", "client"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRegistry([]string{"client", "bf.add", "ping", "client|list"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ping", "client|list", "bf.add", "client"} {
		ia, _ := a.ID(n)
		ib, _ := b.ID(n)
		if ia != ib || a.Name(ia) != n {
			t.Errorf("%s: ids %d and %d", n, ia, ib)
		}
	}
	if a.Len() != 4 {
		t.Errorf("Len %d", a.Len())
	}
	if _, ok := a.ID("BF.ADD"); ok {
		t.Error("ID ignores case; it takes the server's lower-case names")
	}
}
