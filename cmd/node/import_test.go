package main

import (
	"bufio"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// runImport runs `rookery import` with args and stdin, and returns its exit
// code, stdout and stderr.
func runImport(t *testing.T, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	return runTool(t, "import", stdin, args...)
}

// runTool runs `rookery NAME` with args and stdin, and returns its exit code,
// stdout and stderr.
func runTool(t *testing.T, name string, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin(t), append([]string{name}, args...)...)
	cmd.Stdin = stdin
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// importKey is the key on line i of the test inputs: 16 bytes.
func importKey(i int) string { return fmt.Sprintf("key-%012d", i) }

// writeKeys writes keys from to to (exclusive) to path, one per line, with a
// blank line after every blankEvery-th key (0: none), gzipped if path ends
// in .gz, with CRLF line ends if crlf; it returns the lines written.
func writeKeys(t *testing.T, path string, from, to, blankEvery int, crlf bool) int {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	bw := bufio.NewWriter(w)
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	lines := 0
	for i := from; i < to; i++ {
		bw.WriteString(importKey(i) + eol)
		lines++
		if blankEvery > 0 && i%blankEvery == blankEvery-1 {
			bw.WriteString(eol)
			lines++
		}
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}

var importSummary = regexp.MustCompile(`imported (\d+) keys into "[^"]+" in \S+ \((\d+) keys/s\): (\d+) (new|added)`)

// summaryKeys reads the keys and new keys of the summary line.
func summaryKeys(t *testing.T, out string) (keys, added int) {
	t.Helper()
	m := importSummary.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in %q", out)
	}
	keys, _ = strconv.Atoi(m[1])
	added, _ = strconv.Atoi(m[3])
	return keys, added
}

// mustExist fails unless every key from to to (exclusive) is in the filter.
func mustExist(t *testing.T, c *redis.Client, fam, key string, from, to int) {
	t.Helper()
	for a := from; a < to; a += 5000 {
		args := []any{fam + ".MEXISTS", key}
		for i := a; i < min(a+5000, to); i++ {
			args = append(args, importKey(i))
		}
		res, err := c.Do(bg(), args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range res {
			if v != 1 {
				t.Fatalf("%s: %s missing", key, importKey(a+j))
			}
		}
	}
}

// infoInt is field's integer in a RESP2 INFO reply (name, value, ...), 0 if
// it is absent or not an integer.
func infoInt(info []any, field string) int64 {
	for i := 0; i+1 < len(info); i += 2 {
		if fmt.Sprint(info[i]) == field {
			n, _ := strconv.ParseInt(fmt.Sprint(info[i+1]), 10, 64)
			return n
		}
	}
	return 0
}

func infoInt64(t *testing.T, c *redis.Client, fam, key, field string) int64 {
	t.Helper()
	in, err := c.Do(bg(), fam+".INFO", key).Slice()
	if err != nil {
		t.Fatal(err)
	}
	return infoInt(in, field)
}

// TestImportInputs: plain files (CRLF and blank lines too), a gzipped file
// and standard input are read as one stream of lines; --skip counts lines of
// that stream across files; the summary counts new keys and duplicates.
func TestImportInputs(t *testing.T) {
	p := devNode(t, t.TempDir())
	c := p.client(2)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt.gz")
	la := writeKeys(t, a, 0, 3000, 100, true)
	lb := writeKeys(t, b, 3000, 6000, 0, false)

	code, out, errOut := runImport(t, nil, "--addr", p.HTTP, "--key", "users", a, b)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if keys, added := summaryKeys(t, out); keys != 6000 || added < 5990 {
		t.Errorf("summary %q: want 6000 keys, nearly all new", out)
	}
	want := fmt.Sprintf("%d lines read, %d blank", la+lb, la-3000)
	if !strings.Contains(out, want) || !strings.Contains(errOut, `created Bloom filter "users": error rate 0.01, capacity 1000000`) {
		t.Errorf("want %q and the filter's creation:\n%s%s", want, out, errOut)
	}
	mustExist(t, c, "BF", "users", 0, 6000)
	if n := infoInt64(t, c, "BF", "users", "Number of items inserted"); n < 5990 || n > 6000 {
		t.Errorf("BF.INFO items %d", n)
	}
	// The same keys again: all duplicates.
	code, out, _ = runImport(t, nil, "--addr", p.HTTP, "--key", "users", b)
	if keys, added := summaryKeys(t, out); code != 0 || keys != 3000 || added != 0 || !strings.Contains(out, "3000 duplicates") {
		t.Errorf("loading again: exit %d %q", code, out)
	}

	// Standard input, and a skip that ends in the second file: line la+10 of
	// the stream is the 10th line of b, key 3009.
	code, out, errOut = runImport(t, strings.NewReader("s1\n\ns2\r\ns3"), "--resp", p.RESP, "--key", "stdin", "--kind", "cf", "--nx")
	if keys, added := summaryKeys(t, out); code != 0 || keys != 3 || added != 3 {
		t.Errorf("stdin: exit %d\n%s%s", code, out, errOut)
	}
	if r := c.Do(bg(), "CF.MEXISTS", "stdin", "s1", "s2", "s3", "").String(); r != "CF.MEXISTS stdin s1 s2 s3 : [1 1 1 0]" {
		t.Errorf("stdin keys: %s", r)
	}
	code, out, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", "skipped", "--skip", strconv.Itoa(la+10), a, "-", b)
	if code != 0 {
		t.Fatalf("--skip across files: exit %d\n%s%s", code, out, errOut)
	}
	if keys, _ := summaryKeys(t, out); keys != 2990 {
		t.Fatalf("--skip across files: exit %d\n%s%s", code, out, errOut)
	}
	mustExist(t, c, "BF", "skipped", 3010, 6000)
	if n := c.Do(bg(), "BF.MEXISTS", "skipped", importKey(3009), importKey(2999)).String(); !strings.HasSuffix(n, "[0 0]") {
		t.Errorf("skipped keys present: %s", n)
	}
}

// TestImportKinds: each kind creates its filter with the flags' parameters;
// an existing filter of the same kind keeps its own, and the import says so;
// a key holding another kind is refused and left alone.
func TestImportKinds(t *testing.T) {
	p := devNode(t, t.TempDir())
	c := p.client(2)
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, 0, 2000, 0, false)

	code, out, errOut := runImport(t, nil, "--addr", p.HTTP, "--key", "counts", "--kind", "cbf",
		"--error-rate", "0.001", "--capacity", "5000", file)
	if code != 0 || !strings.Contains(errOut, `created counting Bloom filter "counts": error rate 0.001, capacity 5000`) {
		t.Fatalf("cbf: exit %d\n%s%s", code, out, errOut)
	}
	in, _ := c.Do(bg(), "CBF.INFO", "counts").Slice()
	if infoInt(in, "Capacity") != 5000 || fmt.Sprint(in[7]) != "0.001" {
		t.Errorf("CBF.INFO %v", in)
	}
	mustExist(t, c, "CBF", "counts", 0, 2000)
	if n := c.Do(bg(), "CBF.COUNT", "counts", importKey(7)).Val(); n != int64(1) {
		t.Errorf("CBF.COUNT %v", n)
	}

	// Created with room for the input: 1.6 times its lines.
	code, out, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", "coupons", "--kind", "cf", file)
	if code != 0 || !strings.Contains(errOut, `created cuckoo filter "coupons": capacity 3200 (1.6x the input's line count)`) {
		t.Fatalf("cf: exit %d\n%s%s", code, out, errOut)
	}
	if n := infoInt64(t, c, "CF", "coupons", "Number of items inserted"); n != 2000 {
		t.Errorf("CF items %d", n)
	}
	// Again, into the existing filter: every key a second copy (CF.INSERT),
	// or none (--nx); other parameters are reported and not applied.
	code, out, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", "coupons", "--kind", "cf", "--nx",
		"--capacity", "9999", "--error-rate", "0.2", file)
	if code != 0 || !strings.Contains(out, "0 new, 2000 there already") ||
		!strings.Contains(errOut, `loading into the existing cuckoo filter "coupons"`) ||
		!strings.Contains(errOut, `--capacity 9999 applies only to a filter this creates; "coupons" keeps its capacity`) {
		t.Errorf("cf --nx into the existing filter: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runImport(t, nil, "--addr", p.HTTP, "--key", "coupons", "--kind", "cf", file)
	if n := infoInt64(t, c, "CF", "coupons", "Number of items inserted"); code != 0 || n != 4000 ||
		c.Do(bg(), "CF.COUNT", "coupons", importKey(5)).Val() != int64(2) {
		t.Errorf("cf twice: exit %d, %d items\n%s", code, n, out)
	}

	// Another kind: refused, nothing added.
	for _, kind := range []string{"bf", "cbf"} {
		code, out, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", "coupons", "--kind", kind, file)
		if code != 1 || !strings.Contains(errOut, `key "coupons" holds a cuckoo filter (MBbloomCF; --kind cf)`) || out != "" {
			t.Errorf("--kind %s on a cuckoo filter: exit %d\n%s%s", kind, code, out, errOut)
		}
	}
	if n := infoInt64(t, c, "CF", "coupons", "Number of items inserted"); n != 4000 {
		t.Errorf("a refused import changed the filter: %d items", n)
	}

	// A cuckoo filter that cannot grow fills up: the import stops, exit 1,
	// and says where to resume (after the last chunk taken whole; with one
	// chunk in flight, the chunks before the first that failed).
	if err := c.Do(bg(), "CF.RESERVE", "small", 600, "EXPANSION", 0).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", "small", "--kind", "cf", "--chunk", "100", "--inflight", "1", file)
	m := resumeLine.FindStringSubmatch(errOut)
	if code != 1 || m == nil || !strings.Contains(errOut, "stopped by an error") || !strings.Contains(errOut, "no room") ||
		!strings.Contains(errOut, "some keys after it were (or may have been) added too") {
		t.Fatalf("a full filter: exit %d\n%s%s", code, out, errOut)
	}
	if skip, _ := strconv.Atoi(m[1]); skip%100 != 0 || skip == 0 || skip >= 600 {
		t.Errorf("a full filter: resume at line %s, want a chunk's end below 600", m[1])
	}
}

// TestImportErrors: bad flags exit 2 before anything is sent; an unreachable
// node, a missing file or a wrong password exit 1 at once with a message
// saying so.
func TestImportErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, 0, 10, 0, false)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{file}, "--key NAME is required"},
		{[]string{"--key", "k", "--kind", "xf", file}, `--kind "xf"`},
		{[]string{"--key", "k", "--error-rate", "1.5", file}, "--error-rate 1.5"},
		{[]string{"--key", "k", "--capacity", "-3", file}, "--capacity -3"},
		{[]string{"--key", "k", "--skip", "-1", file}, "--skip -1"},
		{[]string{"--key", "k", "--nx", file}, "--nx is for cuckoo filters"},
		{[]string{"--key", "k", "--addr", "nowhere", file}, `--addr "nowhere"`},
		{[]string{"--key", "k", "--cert", "c.pem", file}, "--cert and --cert-key go together"},
		{[]string{"--key", "k", "--bogus", file}, "unknown flag --bogus"},
		{[]string{"--key", "k", "--adr", "127.0.0.1:6480", file}, "unknown flag --adr; did you mean --addr?"},
		{[]string{"--key", "k", "--addr", "redis://127.0.0.1:6479", file}, "a redis:// URL is a RESP address: give it with --resp"},
		{[]string{"--key", "k", "--addr", "127.0.0.1:6480", "--resp", "127.0.0.1:6479", file}, "--addr and --resp both name the cluster"},
	} {
		code, out, errOut := runImport(t, nil, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, want 2 and %q\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}

	began := time.Now()
	code, _, errOut := runImport(t, nil, "--addr", "127.0.0.1:1", "--key", "k", file)
	if code != 1 || !strings.Contains(errOut, "cannot reach the cluster at 127.0.0.1:1") ||
		!strings.Contains(errOut, "connection refused") || time.Since(began) > 5*time.Second {
		t.Errorf("unreachable node: exit %d after %v\n%s", code, time.Since(began), errOut)
	}
	code, _, errOut = runImport(t, nil, "--addr", "127.0.0.1:1", "--key", "k", file+".missing")
	if code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d\n%s", code, errOut)
	}

	p := devNode(t, t.TempDir(), "--requirepass", "s3cret")
	code, _, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", "k", "--password", "wrong", file)
	if code != 1 || !strings.Contains(errOut, "cannot reach the cluster") || !strings.Contains(strings.ToLower(errOut), "pass") {
		t.Errorf("wrong password: exit %d\n%s", code, errOut)
	}
	code, out, errOut := runImport(t, nil, "--addr", p.HTTP, "--key", "k", "--password", "s3cret", file)
	if code != 0 || !strings.Contains(out, "imported 10 keys") {
		t.Errorf("right password: exit %d\n%s%s", code, out, errOut)
	}
}

var resumeLine = regexp.MustCompile(`to resume, run the same command with --skip (\d+):\n  (.*)\n`)

// interruptImport starts `rookery import` with args, sends it sig once it has
// loaded some keys, checks that it stops as documented, and returns the line
// it says to resume from and the command it prints to resume.
func interruptImport(t *testing.T, sig syscall.Signal, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin(t), append([]string{"import", "--progress", "log", "--log-every", "50ms"}, args...)...)
	var out strings.Builder
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	progress := regexp.MustCompile(`^import: ([\d,]+) keys`)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := progress.FindStringSubmatch(sc.Text()); m != nil && m[1] != "0" {
			break // part way: some keys are in, most are not
		}
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	log.Write(rest)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("interrupted import: %v\n%s%s", err, out.String(), log.String())
	}
	m := resumeLine.FindStringSubmatch(log.String())
	if m == nil || !strings.Contains(log.String(), "nothing after it was sent") {
		t.Fatalf("no resume line:\n%s%s", out.String(), log.String())
	}
	// Said once (issue 19, point 9): not again on stdout.
	if n := strings.Count(out.String()+log.String(), "to resume"); n != 1 {
		t.Errorf("the line to resume from is given %d times:\n%s%s", n, out.String(), log.String())
	}
	skip, _ := strconv.Atoi(m[1])
	if skip == 0 {
		t.Fatalf("interrupted before any key was acknowledged:\n%s%s", out.String(), log.String())
	}
	if want := bin(t) + " import "; !strings.HasPrefix(m[2], want) || !strings.HasSuffix(m[2], " --skip "+m[1]) {
		t.Errorf("the command to resume is %q: want %q..., ending in --skip %s", m[2], want, m[1])
	}
	return skip, m[2]
}

// TestImportSIGTERM: SIGTERM stops an import as SIGINT does; resuming from the
// line it prints completes it, every key once (a counting filter counts the
// copies exactly: its 8-bit counters do not collide at this load).
func TestImportSIGTERM(t *testing.T) {
	p := devNode(t, t.TempDir())
	c := p.client(2)
	const keys = 200000
	file := filepath.Join(t.TempDir(), "keys.txt")
	writeKeys(t, file, 0, keys, 0, false)
	if err := c.Do(bg(), "CBF.RESERVE", "counts", "0.0001", keys, "COUNTERBITS", "8").Err(); err != nil {
		t.Fatal(err)
	}
	skip, resume := interruptImport(t, syscall.SIGTERM, "--addr", p.HTTP, "--key", "counts", "--kind", "cbf", "--chunk", "1000", file)
	if n := infoInt64(t, c, "CBF", "counts", "Number of items inserted"); n != int64(skip) {
		t.Errorf("after SIGTERM at line %d: %d items", skip, n)
	}
	// The command it printed, pasted into a shell, finishes the import.
	out, err := exec.Command("bash", "-c", resume).CombinedOutput()
	if err != nil || infoInt64(t, c, "CBF", "counts", "Number of items inserted") != keys {
		t.Fatalf("resumed with %q: %v\n%s", resume, err, out)
	}
	for _, i := range []int{0, skip - 1, skip, keys - 1} {
		if n, err := c.Do(bg(), "CBF.COUNT", "counts", importKey(i)).Int64(); err != nil || n != 1 {
			t.Errorf("CBF.COUNT %s = %d, %v", importKey(i), n, err)
		}
	}
}

// TestImportResume: an import into a cuckoo filter on a three-node cluster
// (through a follower), interrupted with SIGINT part way, then resumed with
// the --skip it printed, holds every key exactly once: the filter's item
// count is the number of keys, and every key's CF.COUNT is what a single
// uninterrupted import of the same file gives.
func TestImportResume(t *testing.T) {
	cl := startCluster(t, 3)
	leader := cl.leader(10 * time.Second)
	follower := cl.followers()[0]
	const keys = 300000
	file := filepath.Join(t.TempDir(), "keys.txt")
	lines := writeKeys(t, file, 0, keys, 1000, false)

	skip, _ := interruptImport(t, syscall.SIGINT, "--addr", follower.HTTP, "--key", "resumed", "--kind", "cf",
		"--capacity", "600000", "--chunk", "1000", "--inflight", "8", file)
	if skip >= lines {
		t.Fatalf("interrupted at line %d of %d: not part way", skip, lines)
	}
	c := client(t, leader.RESP, 2)
	if n := infoInt64(t, c, "CF", "resumed", "Number of items inserted"); n != int64(skip-skip/1001) {
		t.Errorf("after the interruption: %d items for %d lines", n, skip)
	}

	code, out2, errOut := runImport(t, nil, "--addr", follower.HTTP, "--key", "resumed", "--kind", "cf", "--skip", strconv.Itoa(skip), file)
	if code != 0 {
		t.Fatalf("resumed import: exit %d\n%s%s", code, out2, errOut)
	}
	code, out3, errOut := runImport(t, nil, "--resp", leader.RESP, "--key", "reference", "--kind", "cf", "--capacity", "600000", file)
	if code != 0 {
		t.Fatalf("reference import: exit %d\n%s%s", code, out3, errOut)
	}
	if n := infoInt64(t, c, "CF", "resumed", "Number of items inserted"); n != keys {
		t.Errorf("resumed: %d items for %d keys", n, keys)
	}
	for a := 0; a < keys; a += 5000 {
		pipe := c.Pipeline()
		var got, want []*redis.IntCmd
		for i := a; i < min(a+5000, keys); i++ {
			got = append(got, pipe.CFCount(bg(), "resumed", importKey(i)))
			want = append(want, pipe.CFCount(bg(), "reference", importKey(i)))
		}
		if _, err := pipe.Exec(bg()); err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if got[j].Val() != want[j].Val() || got[j].Val() < 1 {
				t.Fatalf("%s: CF.COUNT %d after the resume, %d in one go", importKey(a+j), got[j].Val(), want[j].Val())
			}
		}
	}
}

// TestImportTLS: a node serving RESP over TLS that wants client certificates
// takes an import given --cacert, --cert and --cert-key, and refuses one
// without the certificate.
func TestImportTLS(t *testing.T) {
	dir := t.TempDir()
	if err := nodeproc.MakeCerts(bin(t), dir, "n1", "app"); err != nil {
		t.Fatal(err)
	}
	sec := nodeproc.Security{CertDir: dir, GossipKey: base64.StdEncoding.EncodeToString(make([]byte, 16)),
		Password: "s3cret", RESPTLS: true, HTTPTLS: true}
	args := append([]string{"--id", "n1", "--data-dir", filepath.Join(dir, "data"), "--bootstrap-expect", "1", "--tls-client-auth"},
		nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, append(args, sec.Flags("n1")...)...)
	p.Sec = sec
	p.waitReady(10 * time.Second)
	file := filepath.Join(dir, "keys")
	writeKeys(t, file, 0, 100, 0, false)
	ca := filepath.Join(dir, "ca.pem")

	code, out, errOut := runImport(t, nil, "--addr", p.HTTP, "--key", "k", "--password", "s3cret", "--cacert", ca,
		"--cert", filepath.Join(dir, "app.pem"), "--cert-key", filepath.Join(dir, "app-key.pem"), file)
	if code != 0 || !strings.Contains(out, "imported 100 keys") {
		t.Fatalf("with a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runImport(t, nil, "--resp", p.RESP, "--key", "k", "--password", "s3cret", "--cacert", ca, file)
	if code != 1 || !strings.Contains(errOut, "cannot reach the cluster") {
		t.Errorf("without a client certificate: exit %d\n%s%s", code, out, errOut)
	}
}

// TestImportSizesAndNotes is issue 19's point 9: a cuckoo filter import
// creates has room for its input (no second sub-filter), and running the
// same command again into the filter it made draws no note about a
// parameter that is the same; a rate that differs is named with the
// filter's own.
func TestImportSizesAndNotes(t *testing.T) {
	p := devNode(t, t.TempDir())
	c := p.client(2)
	// 500,000 keys: from about there a cuckoo filter of 1.4 times the keys
	// grows a second sub-filter (and one of the line count always does).
	const keys = 500000
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, 0, keys, 0, false)

	code, out, errOut := runImport(t, nil, "--addr", p.HTTP, "--key", "cf", "--kind", "cf", file)
	if code != 0 || !strings.Contains(errOut, `(1.6x the input's lines, estimated from its size)`) {
		t.Fatalf("cf: exit %d\n%s%s", code, out, errOut)
	}
	if n := infoInt64(t, c, "CF", "cf", "Number of filters"); n != 1 {
		t.Errorf("a cuckoo filter sized by import grew to %d sub-filters for its own input", n)
	}

	for _, kind := range []string{"bf", "cbf"} {
		args := []string{"--addr", p.HTTP, "--key", kind, "--kind", kind, "--error-rate", "0.001", "--capacity", "30000", "--skip", "480000", file}
		if code, out, errOut := runImport(t, nil, args...); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", kind, code, out, errOut)
		}
		code, out, errOut := runImport(t, nil, append(args, "--skip", "500000")...)
		if code != 0 || strings.Contains(errOut, "note:") {
			t.Errorf("%s, the same command again: exit %d, want no note\n%s%s", kind, code, out, errOut)
		}
		code, out, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", kind, "--kind", kind, "--error-rate", "0.01", "--skip", "500000", file)
		if want := `note: --error-rate 0.01 applies only to a filter this creates; "` + kind + `" keeps its error rate 0.001`; code != 0 || !strings.Contains(errOut, want) {
			t.Errorf("%s, another rate: exit %d, want %q\n%s%s", kind, code, want, out, errOut)
		}
	}
}
