package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rookerydb/rookery/internal/certs"
)

// probe is `rookery probe [--cacert FILE] [--cert FILE --key FILE] URL`: it
// exits 0 if URL answers 200 within two seconds, 1 otherwise. Container health
// checks use it, since the image holds nothing but the binary (no curl, no
// shell). An https URL is checked against --cacert (the cluster CA).
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
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if *caFile != "" {
		cfg, err := certs.ClientConfig(*caFile, *certFile, *keyFile)
		if err != nil {
			fmt.Fprintln(out, "probe:", err)
			return 1
		}
		tr.TLSClientConfig = cfg
	} else if *certFile != "" {
		kp, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fmt.Fprintln(out, "probe:", err)
			return 1
		}
		tr.TLSClientConfig = &tls.Config{Certificates: []tls.Certificate{kp}}
	}
	c := http.Client{Timeout: 2 * time.Second, Transport: tr}
	resp, err := c.Get(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(out, "probe:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(out, "probe:", resp.Status)
		return 1
	}
	return 0
}
