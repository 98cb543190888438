package importcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// How import finds the cluster: --addr (or ROOKERY_ADDR, or the local
// defaults) names nodes' HTTP addresses, as for every other tool; the first
// that answers lists the members (GET /v1/nodes) and their RESP addresses,
// which the client then dials. --resp names a RESP address directly.

// checkAddrs refuses an --addr that cannot be a node's HTTP address, before
// anything is read: a redis:// URL (that is --resp's), a host without a port.
func checkAddrs(cfg toolclient.Config) error {
	if cfg.AddrFrom == "" {
		return nil
	}
	for _, a := range cfg.Addrs {
		scheme, rest, found := strings.Cut(a, "://")
		if !found {
			rest, scheme = a, ""
		}
		if scheme == "redis" || scheme == "rediss" {
			return fmt.Errorf("%s %q: a redis:// URL is a RESP address: give it with --resp; %s takes a node's HTTP address (its --http-addr)",
				cfg.AddrFrom, a, cfg.AddrFrom)
		}
		if scheme != "" && scheme != "http" && scheme != "https" {
			return fmt.Errorf("%s %q: want a node's HTTP address, HOST:PORT or an http(s):// URL", cfg.AddrFrom, a)
		}
		if _, _, err := net.SplitHostPort(strings.TrimSuffix(rest, "/")); err != nil {
			return fmt.Errorf("%s %q: want a node's HTTP address, HOST:PORT (its --http-addr, e.g. 127.0.0.1:6480)", cfg.AddrFrom, a)
		}
	}
	return nil
}

// findRESP asks the nodes of --addr for the members and returns their RESP
// addresses: the answering node's first, then the others alive.
func (im *importer) findRESP(ctx context.Context) ([]string, error) {
	cfg := im.o.connCfg
	cfg.Notes, cfg.HeaderTimeout = im.stderr, 10*time.Second
	where := strings.Join(cfg.Addrs, ",")
	c, err := toolclient.New(cfg)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil)
	if err != nil {
		var te *toolclient.Error
		if errors.As(err, &te) && te.Kind == toolclient.KindRESP {
			return nil, fmt.Errorf("cannot reach the cluster at %s: %w; or give a RESP address with --resp", where, err)
		}
		return nil, fmt.Errorf("cannot reach the cluster at %s: %w", where, err)
	}
	defer resp.Body.Close()
	var nodes []cluster.NodeInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&nodes); err != nil {
		return nil, fmt.Errorf("%s answered /v1/nodes with unreadable JSON: %v", resp.Request.URL.Host, err)
	}
	host := resp.Request.URL.Host
	var first, others []string
	for _, n := range nodes {
		if n.RESPAddr == "" || (n.Health != "" && n.Health != "alive") {
			continue
		}
		a := usableAddr(n.RESPAddr, host)
		if n.HTTPAddr == host {
			first = append(first, a)
		} else {
			others = append(others, a)
		}
	}
	addrs := append(first, others...)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s lists no live member with a RESP address; give one with --resp", host)
	}
	return addrs, nil
}

// usableAddr is addr, with an unspecified host (a node listening on
// 0.0.0.0 that advertises no other) replaced by the host reached over HTTP.
func usableAddr(addr, via string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		if vh, _, err := net.SplitHostPort(via); err == nil {
			return net.JoinHostPort(vh, p)
		}
	}
	return addr
}
