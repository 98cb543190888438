// Package tlscmd is `rookery tls ca|cert|init`: it makes the cluster's CA
// and the certificates of its nodes and clients (internal/certs).
package tlscmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/flagerr"
	"github.com/rookerydb/rookery/internal/certs"
)

const tlsUsage = `usage:
  rookery tls ca --out DIR [--days N] [--force]
      make the cluster's CA: DIR/ca.pem and DIR/ca-key.pem (keep ca-key.pem secret)
  rookery tls cert --ca DIR --name ID [--host h1,h2] --out DIR [--days N] [--force]
      make node ID's certificate signed by the CA in DIR: ID.pem and ID-key.pem,
      valid for 127.0.0.1, ::1, localhost, ID and the given hosts, to serve and to dial;
      it lets its holder speak Raft as node ID, and only as ID
  rookery tls cert --ca DIR --client --name NAME --out DIR [--days N] [--force]
      make a client certificate: NAME.pem and NAME-key.pem, for RESP and HTTP under
      --tls-client-auth; it opens no node-to-node port
  rookery tls init --out DIR --names n1,n2,n3 [--host h1,h2] [--node-dirs]
      make whatever of the CA and the named node certificates DIR lacks (for containers);
      with --node-dirs each node's certificate, key and a copy of ca.pem go into DIR/ID/,
      a directory to give that node alone (the CA key stays in DIR)
`

// Command is `rookery tls`.
func Command() command.Command {
	return command.Command{Name: "tls", Synopsis: "make the cluster's CA and certificates",
		Run: func(args []string, _ func(string) (string, bool), stdout, stderr io.Writer) int {
			return tlsCommand(args, stdout, stderr)
		}}
}

// tlsCommand is `rookery tls ...`: it makes the cluster's certificates. It
// returns the exit code.
func tlsCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, tlsUsage)
		return 2
	}
	var err error
	switch args[0] {
	case "ca":
		err = tlsCA(args[1:], stdout, stderr)
	case "cert":
		err = tlsCert(args[1:], stdout, stderr)
	case "init":
		err = tlsInit(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "rookery tls: %v\n%s", flagerr.UnknownCommand(args[0], []string{"ca", "cert", "init"}), tlsUsage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "rookery tls:", err)
		return 1
	}
	return 0
}

func tlsFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rookery tls "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tlsUsage) }
	return fs
}

func parseTLSFlags(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, r := range required {
		if fs.Lookup(r).Value.String() == "" {
			return fmt.Errorf("--%s is required", r)
		}
	}
	return nil
}

func days(n int) (time.Duration, error) {
	if n <= 0 || n > 100*365 {
		return 0, fmt.Errorf("--days must be in [1, 36500], got %d", n)
	}
	return time.Duration(n) * 24 * time.Hour, nil
}

func tlsCA(args []string, stdout, stderr io.Writer) error {
	fs := tlsFlags("ca", stderr)
	out := fs.String("out", "", "directory to write ca.pem and ca-key.pem into")
	n := fs.Int("days", int(certs.DefaultCAValidity/(24*time.Hour)), "days the CA is valid")
	force := fs.Bool("force", false, "replace an existing CA (every certificate it signed stops being trusted)")
	if err := parseTLSFlags(fs, args, "out"); err != nil {
		return err
	}
	valid, err := days(*n)
	if err != nil {
		return err
	}
	if err := certs.WriteCA(*out, valid, *force); err != nil {
		return err
	}
	c, k := certs.CAFiles(*out)
	fmt.Fprintf(stdout, "wrote %s and %s (keep %s secret: it signs members)\n", c, k, k)
	return nil
}

func tlsCert(args []string, stdout, stderr io.Writer) error {
	fs := tlsFlags("cert", stderr)
	ca := fs.String("ca", "", "directory holding ca.pem and ca-key.pem")
	name := fs.String("name", "", "the node id (or with --client the client's name): files NAME.pem and NAME-key.pem")
	client := fs.Bool("client", false, "make a client certificate (RESP and HTTP only) instead of a node's")
	hosts := fs.String("host", "", "comma-separated host names and IP addresses the certificate is valid for, besides 127.0.0.1 and localhost")
	out := fs.String("out", "", "directory to write the certificate and key into")
	n := fs.Int("days", int(certs.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid")
	force := fs.Bool("force", false, "replace existing files")
	if err := parseTLSFlags(fs, args, "ca", "name", "out"); err != nil {
		return err
	}
	valid, err := days(*n)
	if err != nil {
		return err
	}
	c, k := certs.CertFiles(*out, *name)
	if *client {
		if *hosts != "" {
			return errors.New("--host names where a node is reached; a client certificate (--client) takes none")
		}
		if err := certs.WriteClientCert(*ca, *name, *out, valid, *force); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s (a client certificate: RESP and HTTP only)\n", c, k)
		return nil
	}
	if err := certs.WriteCert(*ca, *name, splitList(*hosts), *out, valid, *force); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s (node %s's certificate)\n", c, k, *name)
	return nil
}

func tlsInit(args []string, stdout, stderr io.Writer) error {
	fs := tlsFlags("init", stderr)
	out := fs.String("out", "", "directory for the CA and the certificates")
	names := fs.String("names", "", "comma-separated certificate names (node ids)")
	hosts := fs.String("host", "", "comma-separated extra host names and IP addresses for every certificate")
	nodeDirs := fs.Bool("node-dirs", false, "write each node's files into DIR/ID/ with a copy of ca.pem, and no CA key")
	if err := parseTLSFlags(fs, args, "out", "names"); err != nil {
		return err
	}
	initFn := certs.Init
	if *nodeDirs {
		initFn = certs.InitNodeDirs
	}
	made, err := initFn(*out, splitList(*names), splitList(*hosts))
	for _, f := range made {
		fmt.Fprintln(stdout, "wrote", f)
	}
	if err == nil && len(made) == 0 {
		fmt.Fprintln(stdout, "nothing to do: every file is there")
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
