package acl

import "testing"

func benchUser(b *testing.B, rules ...string) (*Store, *User) {
	s := mustNewStore(b)
	mustSetUser(b, s, "u", rules...)
	return s, s.User("u")
}

func BenchmarkAllowed(b *testing.B) {
	s, u := benchUser(b, "on", "-@all", "+@read", "+@bloom", "-bf.debug")
	id := mustID(b, s.Registry(), "bf.add")
	for b.Loop() {
		if !u.Allowed(id) {
			b.Fatal("refused")
		}
	}
}

func BenchmarkKeyAllowed(b *testing.B) {
	for _, c := range []struct {
		name string
		pats []string
		key  string
	}{
		{"allkeys", []string{"allkeys"}, "tenant:42:seen"},
		{"prefix", []string{"~other:*", "%R~tenant:*"}, "tenant:42:seen"},
		{"exact", []string{"~a", "~b", "~tenant:42:seen"}, "tenant:42:seen"},
		{"glob", []string{"~tenant:[0-9]*:seen"}, "tenant:42:seen"},
		{"miss4", []string{"~a:*", "~b:*", "~*:c", "~d?"}, "tenant:42:seen"},
	} {
		b.Run(c.name, func(b *testing.B) {
			_, u := benchUser(b, append([]string{"on", "+@all"}, c.pats...)...)
			key := []byte(c.key)
			want := c.name != "miss4"
			for b.Loop() {
				if u.KeyAllowed(key, true, false) != want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

// BenchmarkCheck is the whole per-command check: command bit and key.
func BenchmarkCheck(b *testing.B) {
	s, u := benchUser(b, "on", "-@all", "+@bloom", "~tenant:*")
	reg := s.Registry()
	id := mustID(b, reg, "bf.add")
	args := req("bf.add tenant:42:seen item")
	for b.Loop() {
		if d := reg.Check(u, id, args); d != nil {
			b.Fatal(d)
		}
	}
}
