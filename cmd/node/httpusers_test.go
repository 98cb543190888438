package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestHTTPUsers: users made over RESP are the HTTP API's and the tools'
// too. On one node with --requirepass: a user allowed BF.EXISTS reads
// /v1/status with basic auth and is refused POST /v1/drain (403, naming the
// user and +@admin, in ACL LOG); a user with +@admin gets past the check; a
// wrong password is 401; `rookery status --user` works and `rookery node
// drain --user` fails saying why.
func TestHTTPUsers(t *testing.T) {
	p := devNode(t, t.TempDir(), "--requirepass", "s3cret")
	rc := redis.NewClient(&redis.Options{Addr: p.RESP, Password: "s3cret", MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second})
	t.Cleanup(func() { rc.Close() })
	for _, rules := range [][]any{
		{"ACL", "SETUSER", "checker", "on", ">pw", "~names", "+bf.exists"},
		{"ACL", "SETUSER", "operator", "on", ">op", "+@admin", "+@read", "~*"},
		{"ACL", "SETUSER", "loader", "on", ">lp", "+@all", "-@admin", "~*"},
	} {
		if err := rc.Do(bg(), rules...).Err(); err != nil {
			t.Fatalf("%v: %v", rules, err)
		}
	}

	do := func(method, path, user, pass string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+p.HTTP+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := do("GET", "/v1/status", "checker", "pw"); code != 200 || !strings.Contains(body, `"id": "n1"`) {
		t.Errorf("checker GET /v1/status: %d %s", code, body)
	}
	code, body := do("POST", "/v1/drain?id=n1", "checker", "pw")
	var e struct {
		Error string `json:"error"`
	}
	if code != 403 || json.Unmarshal([]byte(body), &e) != nil ||
		e.Error != "user checker may not POST /v1/drain: it needs +@admin" {
		t.Errorf("checker POST /v1/drain: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/drain?id=nobody", "operator", "op"); code == 401 || code == 403 {
		t.Errorf("operator POST /v1/drain: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/status", "checker", "op"); code != 401 {
		t.Errorf("checker with operator's password: %d %s", code, body)
	}
	logged, err := rc.Do(bg(), "ACL", "LOG").Slice()
	if flat := flatReply(logged); err != nil || !strings.Contains(flat, "POST /v1/drain") || !strings.Contains(flat, "http") {
		t.Errorf("ACL LOG after the refusals: %s %v", flat, err)
	}

	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	run := func(env func(string) (string, bool), name string, args ...string) (int, string, string) {
		cmd, _ := commands().Lookup(name)
		var out, errb bytes.Buffer
		code := cmd.Run(args, env, &out, &errb)
		t.Logf("rookery %s %s -> %d\n%s%s", name, strings.Join(args, " "), code, out.String(), errb.String())
		return code, out.String(), errb.String()
	}
	if code, out, _ := run(env(), "status", "--addr", p.HTTP, "--user", "checker", "--password", "pw"); code != 0 || !strings.Contains(out, "n1") {
		t.Errorf("rookery status --user checker: exit %d", code)
	}
	if code, _, _ := run(env("ROOKERY_USER", "checker", "ROOKERY_PASSWORD", "pw"), "status", "--addr", p.HTTP); code != 0 {
		t.Errorf("rookery status with ROOKERY_USER: exit %d", code)
	}
	code, _, errOut := run(env("ROOKERY_USER", "checker", "ROOKERY_PASSWORD", "pw"), "node", "drain", "--addr", p.HTTP, "n1")
	for _, want := range []string{"403", "user checker may not POST /v1/drain: it needs +@admin", "--user"} {
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("rookery node drain as checker: exit %d, %q lacks %q", code, errOut, want)
		}
	}
	if code, _, errOut := run(env(), "status", "--addr", p.HTTP, "--user", "checker", "--password", "bad"); code == 0 ||
		!strings.Contains(errOut, "401") || !strings.Contains(errOut, "--user") {
		t.Errorf("rookery status with a wrong password: exit %d %q", code, errOut)
	}

	// rookery import as a user: the node list over HTTP, the keys over RESP
	// (AUTH loader lp on each connection of the Go client).
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, 0, 10, 0, false)
	code, out, errOut := runImport(t, nil, "--addr", p.HTTP, "--key", "k", "--user", "loader", "--password", "lp", file)
	if code != 0 || !strings.Contains(out, "imported 10 keys") {
		t.Errorf("import as loader: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runImport(t, nil, "--addr", p.HTTP, "--key", "names", "--user", "checker", "--password", "pw", file)
	if code != 1 || !strings.Contains(errOut, "NOPERM") {
		t.Errorf("import as checker: exit %d\n%s", code, errOut)
	}
}

// flatReply flattens a RESP reply for a substring check.
func flatReply(v any) string {
	switch v := v.(type) {
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = flatReply(x)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case map[any]any:
		var parts []string
		for k, x := range v {
			parts = append(parts, flatReply(k)+"="+flatReply(x))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case string:
		return v
	}
	return ""
}
