package main

import (
	"crypto/tls"
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

// respTarget is how a tool reaches a server's RESP port: an address (HOST:PORT,
// or a redis:// or rediss:// URL), a password, and TLS files. `rookery
// migrate` and `rookery import` share it.
type respTarget struct {
	addr, password            string
	caFile, certFile, keyFile string
	// keyFlag, when set, names the client key's flag instead of --key
	// (`rookery import`, whose --key names the filter).
	keyFlag string
}

// flags registers the target's flags on fs with prefix ("" or "from-") and
// help naming what the target is.
func (t *respTarget) flags(fs *flag.FlagSet, prefix, what, defAddr string, env func(string) (string, bool)) {
	if prefix == "" {
		// The cluster's own settings, as the HTTP tools read them
		// (internal/toolclient).
		for _, name := range []string{toolclient.EnvPassword, toolclient.EnvRequirePass} {
			if v, ok := env(name); ok && v != "" && t.password == "" {
				t.password = v
			}
		}
		t.caFile, _ = env(toolclient.EnvCACert)
	}
	addrFlag := "addr"
	if prefix != "" {
		addrFlag = strings.TrimSuffix(prefix, "-")
	}
	fs.StringVar(&t.addr, addrFlag, defAddr, what+": HOST:PORT or redis://[[user]:password@]host:port[/db], rediss:// for TLS")
	fs.StringVar(&t.password, prefix+"password", t.password, what+"'s password (AUTH)")
	fs.StringVar(&t.caFile, prefix+"cacert", t.caFile, "PEM file of the CA that signed "+what+"'s certificate: speak TLS")
	keyFlag := prefix + "key"
	if t.keyFlag != "" {
		keyFlag = t.keyFlag
	}
	fs.StringVar(&t.certFile, prefix+"cert", "", "client certificate to present to "+what+" (with --"+keyFlag+")")
	fs.StringVar(&t.keyFile, keyFlag, "", "client private key for "+what)
}

// options turns the target into go-redis options: a connection that retries
// nothing by itself (the tools decide what is safe to send again) and waits
// long enough for a chunk of a large filter.
func (t *respTarget) options() (*redis.Options, error) {
	if t.addr == "" {
		return nil, errors.New("no address")
	}
	if (t.certFile == "") != (t.keyFile == "") {
		return nil, errors.New("a client certificate needs both its cert and key files")
	}
	var o *redis.Options
	if strings.Contains(t.addr, "://") {
		var err error
		if o, err = redis.ParseURL(t.addr); err != nil {
			return nil, fmt.Errorf("%q: %v", t.addr, err)
		}
	} else {
		if _, _, err := net.SplitHostPort(t.addr); err != nil {
			return nil, fmt.Errorf("%q: want HOST:PORT or a redis:// URL", t.addr)
		}
		o = &redis.Options{Addr: t.addr}
	}
	if t.password != "" {
		o.Password = t.password
	}
	switch {
	case t.caFile != "":
		cfg, err := certs.ClientConfig(t.caFile, t.certFile, t.keyFile)
		if err != nil {
			return nil, err
		}
		if o.TLSConfig != nil {
			cfg.ServerName = o.TLSConfig.ServerName
		}
		o.TLSConfig = cfg
	case t.certFile != "":
		kp, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
		if err != nil {
			return nil, err
		}
		if o.TLSConfig == nil {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.TLSConfig.Certificates = []tls.Certificate{kp}
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
