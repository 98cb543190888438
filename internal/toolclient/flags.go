package toolclient

import (
	"flag"
	"fmt"
	"strings"
)

// Environment variables every HTTP tool reads (the command line wins).
const (
	EnvAddr     = "ROOKERY_ADDR"     // --addr: HOST:PORT[,HOST:PORT...]
	EnvUser     = "ROOKERY_USER"     // --user: the node's user to act as (else the default user)
	EnvPassword = "ROOKERY_PASSWORD" // --password: that user's password, the nodes' --requirepass for default
	EnvCACert   = "ROOKERY_CACERT"   // --cacert: the cluster CA (https)
	// EnvRequirePass is the node's own password variable; the tools fall back
	// on it, so that a shell set up for a node serves its tools too.
	EnvRequirePass = "ROOKERY_REQUIREPASS"
)

// DefaultAddrs are the HTTP addresses tried when neither --addr nor
// ROOKERY_ADDR names one: a node on its default port, then the other two of
// the README's three-process cluster.
var DefaultAddrs = []string{"127.0.0.1:6480", "127.0.0.1:6580", "127.0.0.1:6680"}

// FlagsUsage describes the flags Register adds, for a tool's -h.
const FlagsUsage = `  --addr HOST:PORT[,HOST:PORT...]
                     HTTP addresses of nodes, tried in turn until one answers
                     (default $ROOKERY_ADDR, else 127.0.0.1:6480, :6580, :6680)
  --cacert FILE      CA of the nodes' certificates: speak https (--http-tls)
                     (default $ROOKERY_CACERT)
  --cert, --key FILE client certificate (with --tls-client-auth)
  --user NAME        act as this user of the nodes (ACL SETUSER), sending
                     basic auth NAME:PW (default $ROOKERY_USER, else the
                     default user, whose password goes as a bearer token)
  --password PW      the user's password; the default user's is the nodes'
                     --requirepass (default $ROOKERY_PASSWORD, else
                     $ROOKERY_REQUIREPASS)
`

// Flags are the connection flags of an HTTP tool, as given.
type Flags struct {
	// KeyFlag, when set, names the client key's flag instead of --key
	// (`rookery import`, whose --key names the filter).
	KeyFlag string

	addr, caFile, certFile, keyFile, user, password string
	env                                             func(string) (string, bool)
}

// Register adds --addr, --cacert, --cert, --key, --user and --password to fs;
// env is read when Config is called.
func (f *Flags) Register(fs *flag.FlagSet, env func(string) (string, bool)) {
	f.env = env
	fs.StringVar(&f.addr, "addr", "", "HTTP addresses of nodes, HOST:PORT[,HOST:PORT...] (default $"+EnvAddr+", else the local defaults)")
	fs.StringVar(&f.caFile, "cacert", "", "PEM file of the CA that signed the nodes' certificates: speak https (default $"+EnvCACert+")")
	keyFlag := "key"
	if f.KeyFlag != "" {
		keyFlag = f.KeyFlag
	}
	fs.StringVar(&f.certFile, "cert", "", "client certificate to present (with --"+keyFlag+")")
	fs.StringVar(&f.keyFile, keyFlag, "", "client private key")
	fs.StringVar(&f.user, "user", "", "the nodes' user to act as (default $"+EnvUser+", else the default user)")
	fs.StringVar(&f.password, "password", "", "the user's password (default $"+EnvPassword+", else $"+EnvRequirePass+")")
}

// Config resolves the flags against the environment: each setting comes from
// its flag, else its variable, else its default; the Config records where.
func (f *Flags) Config() (Config, error) {
	env := f.env
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	var c Config
	switch {
	case f.addr != "":
		c.Addrs, c.AddrFrom = splitAddrs(f.addr), "--addr"
	default:
		if v, ok := env(EnvAddr); ok && strings.TrimSpace(v) != "" {
			c.Addrs, c.AddrFrom = splitAddrs(v), EnvAddr
		}
	}
	if len(c.Addrs) == 0 {
		if c.AddrFrom != "" {
			return Config{}, fmt.Errorf("%s %q names no address: want HOST:PORT[,HOST:PORT...]", c.AddrFrom, f.addr)
		}
		c.Addrs = append([]string(nil), DefaultAddrs...)
	}
	c.CAFile, c.CAFrom = f.caFile, "--cacert"
	if c.CAFile == "" {
		if v, ok := env(EnvCACert); ok && v != "" {
			c.CAFile, c.CAFrom = v, EnvCACert
		}
	}
	c.Password, c.PasswordFrom = f.password, "--password"
	if c.Password == "" {
		c.PasswordFrom = ""
		for _, name := range []string{EnvPassword, EnvRequirePass} {
			if v, ok := env(name); ok && v != "" {
				c.Password, c.PasswordFrom = v, name
				break
			}
		}
	}
	c.User, c.UserFrom = f.user, "--user"
	if c.User == "" {
		c.UserFrom = ""
		if v, ok := env(EnvUser); ok && v != "" {
			c.User, c.UserFrom = v, EnvUser
		}
	}
	c.CertFile, c.KeyFile = f.certFile, f.keyFile
	if (c.CertFile == "") != (c.KeyFile == "") {
		if f.KeyFlag != "" {
			return Config{}, fmt.Errorf("--cert and --%s go together", f.KeyFlag)
		}
		return Config{}, fmt.Errorf("--cert and --key go together")
	}
	return c, nil
}

// splitAddrs splits a comma-separated list, dropping blanks.
func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
