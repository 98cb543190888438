package acl

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func TestLogGroups(t *testing.T) {
	l := NewLog(DefaultLogMax)
	d := &Denial{Reason: ReasonCommand, User: "u", Command: "bf.add", Object: "bf.add"}
	l.Add(d.Event(ContextTopLevel, "id=1"), t0)
	l.Add(d.Event(ContextTopLevel, "id=2"), t0.Add(30*time.Second))
	e := l.Entries(10, t0.Add(31*time.Second))
	if len(e) != 1 {
		t.Fatalf("%d entries", len(e))
	}
	want := LogEntry{Count: 2, Reason: ReasonCommand, Context: ContextTopLevel, Object: "bf.add", Username: "u",
		AgeSeconds: 1, ClientInfo: "id=2", EntryID: 0, Created: t0.UnixMilli(), LastUpdated: t0.Add(30 * time.Second).UnixMilli()}
	if e[0] != want {
		t.Errorf("entry %+v\nwant %+v", e[0], want)
	}
	// Not alike: another context, object, user or reason, or over a
	// minute after the last update.
	l.Add(d.Event(ContextMulti, "id=3"), t0.Add(40*time.Second))
	l.Add(Event{Reason: ReasonKey, Object: "k", Username: "u"}, t0.Add(40*time.Second))
	l.Add(Event{Reason: ReasonAuth, Object: "AUTH", Username: "nosuch"}, t0.Add(40*time.Second))
	l.Add(d.Event(ContextTopLevel, "id=4"), t0.Add(91*time.Second))
	e = l.Entries(10, t0.Add(100*time.Second))
	var ids []int64
	for _, x := range e {
		ids = append(ids, x.EntryID)
	}
	if !slices.Equal(ids, []int64{4, 3, 2, 1, 0}) {
		t.Errorf("entry ids newest first %v", ids)
	}
	// A match moves to the front.
	l.Add(Event{Reason: ReasonKey, Object: "k", Username: "u"}, t0.Add(95*time.Second))
	if e = l.Entries(1, t0.Add(100*time.Second)); e[0].EntryID != 2 || e[0].Count != 2 {
		t.Errorf("grouped entry not first: %+v", e[0])
	}
	for r, want := range map[Reason]int64{ReasonCommand: 4, ReasonKey: 2, ReasonAuth: 1, ReasonChannel: 0} {
		if got := l.Denied(r); got != want {
			t.Errorf("denied %s: %d, want %d", r, got, want)
		}
	}
}

func TestLogBounds(t *testing.T) {
	l := NewLog(5)
	for i := range 12 {
		l.Add(Event{Reason: ReasonKey, Object: fmt.Sprint("k", i), Username: "u"}, t0)
	}
	e := l.Entries(100, t0)
	if len(e) != 5 || e[0].Object != "k11" || e[4].Object != "k7" {
		t.Fatalf("kept %+v", e)
	}
	// Only the ten newest are candidates for grouping.
	l = NewLog(DefaultLogMax)
	for i := range 11 {
		l.Add(Event{Reason: ReasonKey, Object: fmt.Sprint("k", i), Username: "u"}, t0)
	}
	l.Add(Event{Reason: ReasonKey, Object: "k0", Username: "u"}, t0)
	if e := l.Entries(100, t0); len(e) != 12 || e[0].Count != 1 {
		t.Errorf("the 11th newest was grouped: %d entries", len(e))
	}
	if len(l.Entries(-3, t0)) != 0 || len(l.Entries(3, t0)) != 3 {
		t.Error("counts")
	}
	l.Reset()
	l.Add(Event{Reason: ReasonAuth, Object: "AUTH", Username: "x"}, t0)
	if e := l.Entries(10, t0); len(e) != 1 || e[0].EntryID != 12 {
		t.Errorf("after RESET: %+v", e)
	}
	l0 := NewLog(0)
	l0.Add(Event{Reason: ReasonAuth, Object: "AUTH", Username: "x"}, t0)
	if len(l0.Entries(10, t0)) != 0 || l0.Denied(ReasonAuth) != 1 {
		t.Error("acllog-max-len 0 keeps entries or stops counting")
	}
	if len(LogFields) != 10 || LogFields[9] != "timestamp-last-updated" {
		t.Error(LogFields)
	}
	for c, s := range map[Context]string{ContextTopLevel: "toplevel", ContextMulti: "multi", ContextLua: "lua", ContextModule: "module"} {
		if c.String() != s {
			t.Error(c, s)
		}
	}
}
