package client_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// The examples run against real nodes that TestMain starts: a plain one at
// nodeAddr, and one at secureAddr that serves RESP over TLS (the cluster CA
// in caFile) and wants the password "s3cret".
var nodeAddr, secureAddr, caFile string

// withExampleNodes runs the tests and examples with the examples' nodes up.
type withExampleNodes struct{ m *testing.M }

func (w withExampleNodes) Run() int {
	dir, err := os.MkdirTemp("", "rookery-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	plain, err := nodeproc.StartCluster(binary, filepath.Join(dir, "plain"), 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer plain.Close()
	certs := filepath.Join(dir, "certs")
	if err := nodeproc.MakeCerts(binary, certs, "n1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sec := nodeproc.Security{CertDir: certs, GossipKey: "MDEyMzQ1Njc4OWFiY2RlZg==", Password: "s3cret",
		RESPTLS: true, HTTPTLS: true}
	secure, err := nodeproc.StartSecureCluster(binary, filepath.Join(dir, "secure"), 1, sec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer secure.Close()
	for _, cl := range []*nodeproc.Cluster{plain, secure} {
		if _, err := cl.Leader(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	nodeAddr, secureAddr, caFile = plain.Nodes[0].RESP, secure.Nodes[0].RESP, filepath.Join(certs, "ca.pem")
	return w.m.Run()
}
