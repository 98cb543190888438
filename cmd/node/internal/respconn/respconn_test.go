package respconn

import (
	"crypto/tls"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/certs"
)

// parse registers t's flags as a tool does and parses args.
func parse(t *testing.T, tg *Target, prefix string, env map[string]string, args ...string) {
	t.Helper()
	fs := flag.NewFlagSet("rookery tool", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tg.Flags(fs, prefix, "the target", "127.0.0.1:6479", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
}

// TestTargetEnvironment: the cluster's target takes the password and CA of
// the cluster's variables, the flags win over them, and a source (prefix
// from-) reads none of them.
func TestTargetEnvironment(t *testing.T) {
	env := map[string]string{"ROOKERY_REQUIREPASS": "node-pw", "ROOKERY_CACERT": "ca.pem"}
	var tg Target
	parse(t, &tg, "", env)
	if tg.Addr != "127.0.0.1:6479" || tg.Password != "node-pw" || tg.CAFile != "ca.pem" {
		t.Errorf("from the environment: %+v", tg)
	}
	env["ROOKERY_PASSWORD"] = "tool-pw"
	tg = Target{}
	parse(t, &tg, "", env, "--cacert", "other.pem")
	if tg.Password != "tool-pw" || tg.CAFile != "other.pem" {
		t.Errorf("ROOKERY_PASSWORD first, --cacert wins: %+v", tg)
	}
	tg = Target{}
	parse(t, &tg, "", env, "--password", "flag-pw")
	if tg.Password != "flag-pw" {
		t.Errorf("--password wins: %+v", tg)
	}
	var src Target
	parse(t, &src, "from-", env, "--from", "redis://h:1", "--from-key", "k.pem", "--from-cert", "c.pem")
	if src.Addr != "redis://h:1" || src.Password != "" || src.CAFile != "" || src.KeyFile != "k.pem" || src.CertFile != "c.pem" {
		t.Errorf("a source reads no variable: %+v", src)
	}
}

// TestTargetOptions: an address or a URL becomes go-redis options that
// retry nothing by themselves; TLS, however it is asked for (a CA, a client
// certificate, rediss://), is the tools' one configuration, TLS 1.2 at least.
func TestTargetOptions(t *testing.T) {
	dir := t.TempDir()
	if err := certs.WriteCA(dir, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteClientCert(dir, "app", dir, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	ca, _ := certs.CAFiles(dir)
	cert, key := certs.CertFiles(dir, "app")

	o, err := (&Target{Addr: "10.0.0.1:6479", Password: "pw"}).Options()
	if err != nil || o.Addr != "10.0.0.1:6479" || o.Password != "pw" || o.TLSConfig != nil || o.MaxRetries != -1 || o.Protocol != 2 {
		t.Errorf("HOST:PORT: %+v %v", o, err)
	}
	o, err = (&Target{Addr: "rediss://:pw@db.example:6380/0"}).Options()
	if err != nil || o.Addr != "db.example:6380" || o.Password != "pw" || o.TLSConfig == nil ||
		o.TLSConfig.ServerName != "db.example" || o.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("rediss://: %+v %v", o, err)
	}
	o, err = (&Target{Addr: "rediss://db.example:6380", CAFile: ca, CertFile: cert, KeyFile: key}).Options()
	if err != nil || o.TLSConfig.ServerName != "db.example" || o.TLSConfig.RootCAs == nil ||
		len(o.TLSConfig.Certificates) != 1 || o.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("rediss:// with a CA and a client certificate: %+v %v", o.TLSConfig, err)
	}
	o, err = (&Target{Addr: "127.0.0.1:6479", CertFile: cert, KeyFile: key}).Options()
	if err != nil || o.TLSConfig == nil || o.TLSConfig.RootCAs != nil || len(o.TLSConfig.Certificates) != 1 ||
		o.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("a client certificate alone: %+v %v", o.TLSConfig, err)
	}
	for _, c := range []struct {
		t    Target
		want string
	}{
		{Target{}, "no address"},
		{Target{Addr: "nohost"}, `"nohost": want HOST:PORT or a redis:// URL`},
		{Target{Addr: "http://h:1"}, `"http://h:1": `},
		{Target{Addr: "h:1", CertFile: cert}, "a client certificate needs both its cert and key files"},
		{Target{Addr: "h:1", CAFile: dir + "/missing.pem"}, "missing.pem"},
	} {
		if _, err := c.t.Options(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.t, err, c.want)
		}
	}
}

// TestTargetUser: the cluster's target takes its user from --user, else
// ROOKERY_USER (empty is unset); a source's is --from-user, else its URL's;
// either becomes AUTH user password (go-redis's Username).
func TestTargetUser(t *testing.T) {
	env := map[string]string{"ROOKERY_USER": "loader", "ROOKERY_PASSWORD": "lp"}
	var tg Target
	parse(t, &tg, "", env)
	if o, err := tg.Options(); err != nil || o.Username != "loader" || o.Password != "lp" {
		t.Errorf("from the environment: %+v %v", o, err)
	}
	tg = Target{}
	parse(t, &tg, "", env, "--user", "other")
	if tg.User != "other" {
		t.Errorf("--user wins: %+v", tg)
	}
	tg = Target{}
	parse(t, &tg, "", map[string]string{"ROOKERY_USER": ""})
	if o, err := tg.Options(); err != nil || tg.User != "" || o.Username != "" {
		t.Errorf("an empty ROOKERY_USER: %+v %v", tg, err)
	}
	var src Target
	parse(t, &src, "from-", env, "--from", "redis://u:p@h:1")
	if o, err := src.Options(); err != nil || o.Username != "u" || o.Password != "p" {
		t.Errorf("a source's URL: %+v %v", o, err)
	}
	src = Target{}
	parse(t, &src, "from-", env, "--from", "redis://u:p@h:1", "--from-user", "v", "--from-password", "q")
	if o, err := src.Options(); err != nil || o.Username != "v" || o.Password != "q" {
		t.Errorf("--from-user and --from-password win over the URL: %+v %v", o, err)
	}
}
