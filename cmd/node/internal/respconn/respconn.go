// Package respconn is how a tool reaches a server's RESP port: `rookery
// import` reaches a cluster, `rookery migrate` a source (a Redis with
// RedisBloom, or another cluster) and a target. The flags, the variables they
// default from and the client's settings are the same for each.
package respconn

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/certs"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// Target is how a tool reaches a server's RESP port: an address (HOST:PORT,
// or a redis:// or rediss:// URL), a user and password (the default user
// without a user), and TLS files.
type Target struct {
	Addr, User, Password      string
	CAFile, CertFile, KeyFile string
	// KeyFlag, when set, names the client key's flag instead of --key
	// (`rookery import`, whose --key names the filter).
	KeyFlag string
}

// Flags registers the target's flags on fs with prefix ("" or "from-") and
// help naming what the target is; with no prefix the target defaults to the
// cluster's own settings from env.
func (t *Target) Flags(fs *flag.FlagSet, prefix, what, defAddr string, env func(string) (string, bool)) {
	if prefix == "" {
		// The cluster's own settings, as the HTTP tools read them
		// (internal/toolclient).
		for _, name := range []string{toolclient.EnvPassword, toolclient.EnvRequirePass} {
			if v, ok := env(name); ok && v != "" && t.Password == "" {
				t.Password = v
			}
		}
		if v, ok := env(toolclient.EnvUser); ok && v != "" && t.User == "" {
			t.User = v
		}
		t.CAFile, _ = env(toolclient.EnvCACert)
	}
	addrFlag := "addr"
	if prefix != "" {
		addrFlag = strings.TrimSuffix(prefix, "-")
	}
	fs.StringVar(&t.Addr, addrFlag, defAddr, what+": HOST:PORT or redis://[[user]:password@]host:port[/db], rediss:// for TLS")
	fs.StringVar(&t.User, prefix+"user", t.User, "the user of "+what+" to act as (default: the URL's, else the default user)")
	fs.StringVar(&t.Password, prefix+"password", t.Password, what+"'s password (AUTH)")
	fs.StringVar(&t.CAFile, prefix+"cacert", t.CAFile, "PEM file of the CA that signed "+what+"'s certificate: speak TLS")
	keyFlag := prefix + "key"
	if t.KeyFlag != "" {
		keyFlag = t.KeyFlag
	}
	fs.StringVar(&t.CertFile, prefix+"cert", "", "client certificate to present to "+what+" (with --"+keyFlag+")")
	fs.StringVar(&t.KeyFile, keyFlag, "", "client private key for "+what)
}

// Options turns the target into go-redis options: a connection that retries
// nothing by itself (the tools decide what is safe to send again) and waits
// long enough for a chunk of a large filter. TLS is spoken with a CA file, a
// client certificate or a rediss:// URL, configured by certs.ClientConfig as
// every tool's is.
func (t *Target) Options() (*redis.Options, error) {
	if t.Addr == "" {
		return nil, errors.New("no address")
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("a client certificate needs both its cert and key files")
	}
	var o *redis.Options
	if strings.Contains(t.Addr, "://") {
		var err error
		if o, err = redis.ParseURL(t.Addr); err != nil {
			return nil, fmt.Errorf("%q: %v", t.Addr, err)
		}
	} else {
		if _, _, err := net.SplitHostPort(t.Addr); err != nil {
			return nil, fmt.Errorf("%q: want HOST:PORT or a redis:// URL", t.Addr)
		}
		o = &redis.Options{Addr: t.Addr}
	}
	if t.User != "" {
		o.Username = t.User
	}
	if t.Password != "" {
		o.Password = t.Password
	}
	if t.CAFile != "" || t.CertFile != "" {
		cfg, err := certs.ClientConfig(t.CAFile, t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		if o.TLSConfig != nil {
			cfg.ServerName = o.TLSConfig.ServerName // a rediss:// URL's host
		}
		o.TLSConfig = cfg
	}
	// RESP2: every reply these tools read has one shape in it, and servers
	// without HELLO (older Redis) answer it too.
	o.Protocol = 2
	o.MaxRetries = -1
	o.DialTimeout = 10 * time.Second
	o.ReadTimeout = 2 * time.Minute
	o.WriteTimeout = 2 * time.Minute
	o.PoolSize = 4
	o.DisableIdentity = true
	return o, nil
}
