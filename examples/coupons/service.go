package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/client"
)

// Service is the coupon service: the HTTP handlers over a store of record
// and a cuckoo filter of the codes that are issued and not yet redeemed.
type Service struct {
	c      *client.Client
	st     *Store
	filter string // the cuckoo filter's name
	log    *slog.Logger

	// maxIssue bounds n in one issue request; chunk is the codes per
	// CF.INSERT (one Raft log entry, one key); opTimeout bounds one filter
	// write made on behalf of a request that the store has already decided.
	maxIssue, chunk int
	opTimeout       time.Duration

	claims claims
	stats  counters
}

// counters are the redeem outcomes since the service started.
type counters struct {
	requests, redeemed, already, filterNo, storeNo, unavailable atomic.Int64
}

// Handler routes the service's requests.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /campaigns/{id}/issue", s.issue)
	mux.HandleFunc("POST /redeem/{code}", s.redeem)
	mux.HandleFunc("GET /coupons/{code}", s.coupon)
	mux.HandleFunc("GET /stats", s.statsPage)
	return mux
}

// issue: POST /campaigns/{id}/issue?n=N. The codes go to the store first,
// with the filter operations that add them, in one transaction; then to the
// filter, one CF.INSERT per chunk, each under its own key. The answer lists
// the codes once the filter holds them (200), or says that it could not
// confirm some yet (202: they are issued, and redeem once the outbox has
// finished), or that nothing was issued (503).
func (s *Service) issue(w http.ResponseWriter, r *http.Request) {
	campaign := r.PathValue("id")
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	switch {
	case !validCampaign(campaign):
		reply(w, http.StatusBadRequest, map[string]any{"error": "campaign: 1 to 64 letters, digits, - or _"})
		return
	case err != nil || n < 1 || n > s.maxIssue:
		reply(w, http.StatusBadRequest, map[string]any{"error": "n: a number from 1 to " + strconv.Itoa(s.maxIssue)})
		return
	}
	keys := make([]client.Key, (n+s.chunk-1)/s.chunk)
	for i := range keys {
		keys[i] = s.c.NewKey()
		s.claims.take(keys[i]) // before they are in the outbox, so the loop leaves them to us
		defer s.claims.release(keys[i])
	}
	codes := newCodes(n)
	ops, err := s.st.Issue(campaign, codes, keys, s.chunk, time.Now())
	if errors.Is(err, ErrCodeTaken) { // draw again, once
		codes = newCodes(n)
		ops, err = s.st.Issue(campaign, codes, keys, s.chunk, time.Now())
	}
	if err != nil {
		s.fail(w, "issue: store", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opTimeout)
	defer cancel()
	for i, op := range ops {
		err := s.send(ctx, op)
		if err == nil {
			continue
		}
		if i == 0 && errors.Is(err, client.ErrUnavailable) {
			// Not one code reached the filter and none was handed out:
			// take them all back, so that a retry of the request is clean.
			if uerr := s.st.Unissue(ops); uerr != nil {
				s.fail(w, "issue: take back", uerr)
				return
			}
			s.unavailable(w, "nothing was issued", err)
			return
		}
		s.log.Warn("issue: filter add not settled; the outbox will finish it", "campaign", campaign, "err", err)
		reply(w, http.StatusAccepted, map[string]any{"campaign": campaign, "codes": codes,
			"pending": "issued, but the filter has not confirmed every code yet: they redeem once the service has finished adding them"})
		return
	}
	s.answerIssued(w, campaign, codes)
}

// answerIssued lists the codes that the filter took; a code it had no room
// for is void.
func (s *Service) answerIssued(w http.ResponseWriter, campaign string, codes []string) {
	issued := codes[:0:0]
	for _, code := range codes {
		if c, ok, err := s.st.Get(code); err == nil && ok && c.State == StateIssued {
			issued = append(issued, code)
		}
	}
	if len(issued) < len(codes) {
		reply(w, http.StatusInsufficientStorage, map[string]any{"campaign": campaign, "codes": issued,
			"error": "the filter is full: only these codes were issued"})
		return
	}
	reply(w, http.StatusOK, map[string]any{"campaign": campaign, "codes": codes})
}

// redeem: POST /redeem/{code}. The filter first: "no" means the code was
// never issued or is used, and the store is not asked. "Yes" is checked and
// decided by the store in one transaction; then the code leaves the filter.
func (s *Service) redeem(w http.ResponseWriter, r *http.Request) {
	code, ok := normalizeCode(r.PathValue("code"))
	if !ok {
		reply(w, http.StatusBadRequest, map[string]any{"error": "not a code: want XXXX-XXXX-XXXX"})
		return
	}
	s.stats.requests.Add(1)
	maybe, err := s.c.CFExists(r.Context(), s.filter, code)
	if err != nil { // a read is never indeterminate: nothing happened
		s.stats.unavailable.Add(1)
		s.unavailable(w, "nothing changed", err)
		return
	}
	if !maybe {
		s.stats.filterNo.Add(1)
		reply(w, http.StatusNotFound, map[string]any{"code": code, "result": "unknown"})
		return
	}
	key := s.c.NewKey() // the CF.DEL's, stored with the decision
	s.claims.take(key)
	defer s.claims.release(key)
	out, op, err := s.st.Redeem(code, key, time.Now())
	if err != nil {
		s.fail(w, "redeem: store", err)
		return
	}
	switch out {
	case NoSuchCoupon:
		s.stats.storeNo.Add(1) // a false positive of the filter
		reply(w, http.StatusNotFound, map[string]any{"code": code, "result": "unknown"})
	case AlreadyRedeemed:
		s.stats.already.Add(1)
		reply(w, http.StatusConflict, map[string]any{"code": code, "result": "already redeemed"})
	case NotYetActive:
		s.stats.unavailable.Add(1)
		reply(w, http.StatusServiceUnavailable, map[string]any{"code": code,
			"error": "this coupon is still being issued: nothing changed, try again shortly"})
	case Redeemed:
		s.stats.redeemed.Add(1)
		// The store has decided: the answer is "redeemed" whatever the
		// filter says. A delete left unsettled is the outbox's to finish.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opTimeout)
		defer cancel()
		if err := s.send(ctx, op); err != nil {
			s.log.Warn("redeem: filter delete not settled; the outbox will finish it", "code", code, "err", err)
		}
		reply(w, http.StatusOK, map[string]any{"code": code, "result": "redeemed"})
	}
}

// coupon: GET /coupons/{code}, the store's record and what the filter says.
func (s *Service) coupon(w http.ResponseWriter, r *http.Request) {
	code, ok := normalizeCode(r.PathValue("code"))
	if !ok {
		reply(w, http.StatusBadRequest, map[string]any{"error": "not a code: want XXXX-XXXX-XXXX"})
		return
	}
	c, found, err := s.st.Get(code)
	if err != nil {
		s.fail(w, "coupon: store", err)
		return
	}
	out := map[string]any{"code": code, "state": "unknown"}
	status := http.StatusNotFound
	if found {
		out["coupon"], status = c, http.StatusOK
		delete(out, "state")
	}
	if n, err := s.c.CFCount(r.Context(), s.filter, code); err != nil {
		out["filter"] = "unavailable: " + err.Error()
	} else {
		out["filter"] = map[string]any{"reports": n > 0, "copies": n}
	}
	reply(w, status, out)
}

// Stats is GET /stats.
type Stats struct {
	RedeemRequests  int64 `json:"redeem_requests"`
	Redeemed        int64 `json:"redeemed"`
	AlreadyRedeemed int64 `json:"already_redeemed"`
	// UnknownByFilter were answered "unknown" on the filter's "no", without
	// a store lookup; UnknownByStore after one (the filter's false positives).
	UnknownByFilter int64 `json:"unknown_by_filter"`
	UnknownByStore  int64 `json:"unknown_by_store"`
	Unavailable     int64 `json:"unavailable"`
	StoreLookups    int64 `json:"store_lookups"`
	// LookupsAvoided is the share of "unknown" answers given without a
	// store lookup: what the filter saves.
	LookupsAvoided float64 `json:"lookups_avoided"`
	OutboxPending  int     `json:"outbox_pending"`
	FilterStale    int     `json:"filter_stale"`
}

// Stats returns the counters and the outbox's state.
func (s *Service) Stats() (Stats, error) {
	st := Stats{RedeemRequests: s.stats.requests.Load(), Redeemed: s.stats.redeemed.Load(),
		AlreadyRedeemed: s.stats.already.Load(), UnknownByFilter: s.stats.filterNo.Load(),
		UnknownByStore: s.stats.storeNo.Load(), Unavailable: s.stats.unavailable.Load()}
	st.StoreLookups = st.Redeemed + st.AlreadyRedeemed + st.UnknownByStore
	if u := st.UnknownByFilter + st.UnknownByStore; u > 0 {
		st.LookupsAvoided = float64(st.UnknownByFilter) / float64(u)
	}
	var err error
	st.OutboxPending, st.FilterStale, err = s.st.Counts()
	return st, err
}

func (s *Service) statsPage(w http.ResponseWriter, _ *http.Request) {
	st, err := s.Stats()
	if err != nil {
		s.fail(w, "stats", err)
		return
	}
	reply(w, http.StatusOK, st)
}

// unavailable answers 503: the cluster could not be reached or could not
// take the request, and what that left unchanged.
func (s *Service) unavailable(w http.ResponseWriter, what string, err error) {
	s.log.Warn("cluster unavailable", "err", err)
	reply(w, http.StatusServiceUnavailable, map[string]any{
		"error": "coupon cluster unavailable: " + what + "; try again later", "reason": err.Error()})
}

func (s *Service) fail(w http.ResponseWriter, what string, err error) {
	s.log.Error(what, "err", err)
	reply(w, http.StatusInternalServerError, map[string]any{"error": what + ": " + err.Error()})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
