package main

import (
	"fmt"
	"strings"
	"testing"
)

// runMigrate runs `rookery migrate` with args and returns its exit code,
// stdout and stderr.
func runMigrate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runTool(t, "migrate", nil, args...)
}

// TestMigrateCopiesEveryFilter: every Bloom and cuckoo filter of the source
// arrives with the same answers and counts; other keys are left alone; a key
// the target has is skipped unless --replace; an empty cuckoo filter (which
// SCANDUMP does not dump) arrives empty with its shape.
func TestMigrateCopiesEveryFilter(t *testing.T) {
	src, dst := devNode(t, t.TempDir()), devNode(t, t.TempDir())
	s, d := src.client(2), dst.client(2)
	must := func(args ...any) {
		t.Helper()
		if err := s.Do(bg(), args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must("BF.RESERVE", "users", 0.01, 50, "EXPANSION", 2)
	must("CF.RESERVE", "coupons", 200, "BUCKETSIZE", 4, "EXPANSION", 2)
	must("CF.RESERVE", "empty", 1000, "BUCKETSIZE", 4, "MAXITERATIONS", 30, "EXPANSION", 2)
	must("CBF.RESERVE", "counts", 0.01, 100)
	var users, coupons []any
	for i := 0; i < 400; i++ {
		users = append(users, fmt.Sprint("user-", i))
		coupons = append(coupons, fmt.Sprint("C-", i))
	}
	must(append([]any{"BF.MADD", "users"}, users...)...)
	must(append([]any{"CF.INSERT", "coupons", "ITEMS"}, coupons...)...)
	must("CF.DEL", "coupons", "C-7")
	must("BF.ADD", "taken", "x")
	if err := d.Do(bg(), "BF.ADD", "taken", "y").Err(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runMigrate(t, "--from", "redis://"+src.RESP, "--to", dst.RESP)
	if code != 0 || !strings.Contains(out, "copied 3 filters") || !strings.Contains(out, "1 skipped, 0 failed") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "taken (MBbloom--): skipped: the target has this key") ||
		!strings.Contains(errOut, "(1 keys of other types left alone)") {
		t.Errorf("progress does not say what was skipped:\n%s", errOut)
	}
	for _, it := range users {
		if !d.BFExists(bg(), "users", it).Val() {
			t.Fatalf("users: %v lost", it)
		}
	}
	for _, it := range append(coupons, "C-absent", "C-7") {
		// Counts are upper bounds (fingerprints collide): the copy answers as
		// the source does, and holds every coupon it held.
		want := s.CFCount(bg(), "coupons", it).Val()
		if n := d.CFCount(bg(), "coupons", it).Val(); n != want || (it != "C-7" && it != "C-absent" && n < 1) {
			t.Fatalf("coupons: CF.COUNT %v = %d, source %d", it, n, want)
		}
	}
	for _, key := range []string{"users", "coupons", "empty"} {
		fam := "BF"
		if key != "users" {
			fam = "CF"
		}
		a := s.Do(bg(), fam+".INFO", key).String()
		b := d.Do(bg(), fam+".INFO", key).String()
		if a != b {
			t.Errorf("%s: INFO differs:\nsource %s\ntarget %s", key, a, b)
		}
	}
	if d.BFExists(bg(), "taken", "x").Val() || d.Exists(bg(), "counts").Val() != 0 {
		t.Errorf("a skipped key or another type was copied")
	}

	code, out, errOut = runMigrate(t, "--from", "redis://"+src.RESP, "--to", dst.RESP, "--replace", "--match", "t*")
	if code != 0 || !strings.Contains(out, "copied 1 filters") || !d.BFExists(bg(), "taken", "x").Val() || d.BFExists(bg(), "taken", "y").Val() {
		t.Errorf("--replace: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runMigrate(t, "--to", dst.RESP); code != 2 || !strings.Contains(errOut, "--from is required") {
		t.Errorf("without --from: exit %d %s", code, errOut)
	}
	if code, _, errOut := runMigrate(t, "--from", "redis://127.0.0.1:1", "--to", dst.RESP); code != 1 || !strings.Contains(errOut, "source 127.0.0.1:1") {
		t.Errorf("unreachable source: exit %d %s", code, errOut)
	}
}
