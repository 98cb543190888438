// Package probecmd is `rookery probe`, a container's health check.
package probecmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// probeTimeout bounds one probe.
const probeTimeout = 2 * time.Second

// Command is `rookery probe`; it writes only to stderr.
func Command() command.Command {
	return command.Command{Name: "probe", Synopsis: "exit 0 if a URL answers 200 (a container health check)",
		Run: func(args []string, _ func(string) (string, bool), _, stderr io.Writer) int {
			return probe(args, stderr)
		}}
}

// probe is `rookery probe [--cacert FILE] [--cert FILE --key FILE] URL`: it
// exits 0 if URL answers 200 within two seconds, 1 otherwise. Container health
// checks use it, since the image holds nothing but the binary (no curl, no
// shell). An https URL is checked against --cacert (the cluster CA). A failure
// says which flag fixes it, as the other tools do (internal/toolclient).
func probe(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("rookery probe", flag.ContinueOnError)
	fs.SetOutput(out)
	caFile := fs.String("cacert", "", "PEM file of the CA that signed the server's certificate (https)")
	certFile := fs.String("cert", "", "client certificate to present (with --key)")
	keyFile := fs.String("key", "", "client private key")
	fs.Usage = func() { fmt.Fprintln(out, "usage: rookery probe [--cacert FILE] [--cert FILE --key FILE] URL") }
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || (*certFile == "") != (*keyFile == "") {
		fs.Usage()
		return 2
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		fmt.Fprintf(out, "probe: %q: want an http:// or https:// URL\n", fs.Arg(0))
		return 2
	}
	c, err := toolclient.New(toolclient.Config{Addrs: []string{u.Scheme + "://" + u.Host}, AddrFrom: "the URL", AddrFlag: "the URL",
		CAFile: *caFile, CAFrom: "--cacert", CertFile: *certFile, KeyFile: *keyFile, HeaderTimeout: probeTimeout})
	if err != nil {
		fmt.Fprintln(out, "probe:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	resp, err := c.DoAt(ctx, 0, http.MethodGet, u.RequestURI(), nil)
	if err != nil {
		fmt.Fprintln(out, "probe:", err)
		return 1
	}
	resp.Body.Close()
	return 0
}
