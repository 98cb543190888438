package main

import (
	"net/http"

	"github.com/rookerydb/rookery/cluster"
)

// faultRoutes wires cluster.Faults to HTTP for fault-injection runs: a node
// started with --fault-injection dials its peers through faults, and
//
//	POST /debug/faults/cut?peer=RAFTADDR   breaks its links with that peer
//	POST /debug/faults/heal                restores every link
//
// A partition needs both ends to cut: each side only closes and refuses the
// connections it dials itself.
func faultRoutes(faults *cluster.Faults, self string) map[string]http.Handler {
	return map[string]http.Handler{
		"POST /debug/faults/cut": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			peer := r.URL.Query().Get("peer")
			if peer == "" {
				http.Error(w, "peer is required", http.StatusBadRequest)
				return
			}
			faults.Cut(self, peer)
			w.Write([]byte("cut\n"))
		}),
		"POST /debug/faults/heal": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			faults.Heal()
			w.Write([]byte("healed\n"))
		}),
	}
}
