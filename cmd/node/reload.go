package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rookerydb/rookery/internal/certs"
)

// certWatchInterval is how often the certificate files are checked for change.
const certWatchInterval = 2 * time.Second

// certExpiryWarning: a certificate closer than this to its end is logged at
// warn on every load.
const certExpiryWarning = 30 * 24 * time.Hour

// loadCerts loads the node's TLS material and keeps it fresh until ctx ends,
// reloading it whenever the files change; reload is the same for SIGHUP. A
// reload that fails keeps the certificates in use and says why.
func loadCerts(ctx context.Context, o *options, log *slog.Logger) (src *certs.Source, reload func(), err error) {
	src, err = certs.LoadNode(o.tlsCA, o.tlsCert, o.tlsKey, o.id)
	if err != nil {
		return nil, nil, err
	}
	log = log.With("component", "tls")
	logLeaf(log, src, "certificate loaded")
	report := func(how string) func(error) {
		return func(err error) {
			if err != nil {
				log.Error("certificate reload failed; keeping the certificates in use", "trigger", how, "err", err)
				return
			}
			logLeaf(log, src, "certificate reloaded", "trigger", how)
		}
	}
	go src.Watch(ctx, certWatchInterval, report("file change"))
	return src, func() {
		_, err := src.Reload()
		report("SIGHUP")(err)
	}, nil
}

// onHUP calls reload on every SIGHUP until ctx ends. Without one, SIGHUP is
// only logged: it must never stop the node, as it would by default.
func onHUP(ctx context.Context, log *slog.Logger, reload func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if reload == nil {
					log.Info("SIGHUP: nothing to reload (no --tls-cert)")
					continue
				}
				reload()
			}
		}
	}()
}

func logLeaf(log *slog.Logger, src *certs.Source, msg string, args ...any) {
	leaf := src.Leaf()
	left := time.Until(leaf.NotAfter)
	kind, name := certs.Identify(leaf)
	args = append(args, "name", name, "kind", kind.String(), "serial", fmt.Sprintf("%x", leaf.SerialNumber),
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	if kind == certs.KindLegacy {
		log.Warn(msg+"; it is a certificate of the old kind, which names no node: peers take it as node "+name+
			" only while it is a server of the cluster. Re-issue it, on every node in turn, as a node certificate: "+
			"rookery tls cert --ca DIR --name "+name+" --out DIR --force (the node loads it without a restart), "+
			"and client certificates with --client (see README, Security)", args...)
		return
	}
	if left < certExpiryWarning {
		log.Warn(msg+"; it expires soon: rotate it (rookery tls cert, then SIGHUP)", append(args, "expires_in", left.Round(time.Hour).String())...)
		return
	}
	log.Info(msg, args...)
}
