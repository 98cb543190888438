package mutant

import "testing"

func TestSet(t *testing.T) {
	if err := Set("no-such-bug"); err == nil {
		t.Fatal("an unknown mutant was accepted")
	}
	for _, n := range Names {
		err := Set(n)
		if Enabled != (err == nil) {
			t.Fatalf("Set(%q) = %v in a build with mutants %v", n, err, Enabled)
		}
		if On(n) != Enabled {
			t.Fatalf("On(%q) = %v after Set in a build with mutants %v", n, On(n), Enabled)
		}
		for _, o := range Names {
			if o != n && On(o) {
				t.Fatalf("%s is on with %s planted", o, n)
			}
		}
	}
	if err := Set(""); err != nil || On(Names[0]) {
		t.Fatalf("Set(\"\") = %v, or a mutant still on", err)
	}
}
