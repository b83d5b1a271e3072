package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// cbStore is a store with the to-call-back list.
type cbStore interface {
	store.Store
	store.CallbackStore
}

// asCallbacks returns s as a cbStore, or skips the test loudly: the list is part of the
// contract of every store that implements store.CallbackStore.
func asCallbacks(t *testing.T, s store.Store) cbStore {
	t.Helper()
	cs, ok := s.(cbStore)
	if !ok {
		t.Skipf("SKIPPED: %T does not implement store.CallbackStore; the to-call-back contract is not checked", s)
	}
	return cs
}

// cbCall is one call of a to-call-back scenario, written as two writes (its start, then its
// end), so that the writes of a scenario can be reordered, repeated and split.
type cbCall struct {
	provider, id string
	dir          string // inbound, outbound
	party        string // the outside party's JSON
	start        int    // seconds after at(0)
	answeredBy   string // "" when nobody answered
	voicemail    bool
	ext          string // the extension that placed an outbound call
	locations    string // JSON array
}

// e164 is an outside party with number n.
func e164(n string) string { return fmt.Sprintf(`{"kind":"e164","number":%q}`, n) }

// writes returns the two writes of c.
func (c cbCall) writes() []store.CallWrite {
	var block string
	if c.dir == "inbound" {
		block = fmt.Sprintf(`{"direction":"inbound","from":%s,"to":{"kind":"extension","extension":"200"}}`, c.party)
	} else {
		block = fmt.Sprintf(`{"direction":%q,"from":{"kind":"extension","extension":%q},"to":%s}`, c.dir, c.ext, c.party)
	}
	locs := c.locations
	if locs == "" {
		locs = `["main"]`
	}
	mk := func(typ string, seq int64, when time.Time, st store.State) store.CallWrite {
		w := cw(c.provider, c.id, st, ev(typ, seq, when))
		w.Direction, w.Block = c.dir, json.RawMessage(block)
		w.Summary.Locations = json.RawMessage(locs)
		w.Summary.FromExt = c.ext
		// As the planner describes a block: the outside party's digits key the side it is on.
		var party struct {
			Number string `json:"number"`
		}
		_ = json.Unmarshal([]byte(c.party), &party)
		if c.dir == "inbound" {
			w.Summary.FromKey = store.NumberKey(party.Number)
		} else {
			w.Summary.ToKey = store.NumberKey(party.Number)
		}
		w.Summary.Callback, _ = store.CallbackParty(c.dir, w.Block)
		return w
	}
	start := mk("call_received", 1, at(c.start), store.StateRinging)
	end := mk("call_ended", 3, at(c.start+30), store.StateEnded)
	end.Summary.EndedAt = at(c.start + 30)
	switch {
	case c.voicemail:
		end.Summary.Flags = store.FlagVoicemail
	case c.answeredBy != "":
		ans := mk("call_answered", 2, at(c.start+5), store.StateAnswered)
		ans.Summary.AnsweredAt, ans.Summary.AnsweredBy, ans.Summary.Flags = at(c.start+5), c.answeredBy, store.FlagAnswered
		end.Events = append([]store.EventWrite{ans.Events[0]}, end.Events...)
		end.FirstAt = ans.FirstAt
		end.Summary.AnsweredAt, end.Summary.AnsweredBy, end.Summary.Flags = at(c.start+5), c.answeredBy, store.FlagAnswered
	}
	return []store.CallWrite{start, end}
}

// The numbers of the scenarios.
const (
	cbAda   = "+15550100101"
	cbBob   = "+15550100102"
	cbCarla = "+15550100103"
	cbDan   = "+15550100104"
)

// cbScenario is a morning at a front desk: Ada missed twice and called back (the callback
// reported by another provider), Bob left a voicemail, Carla missed and then called in again
// and was answered, Dan missed and was called back before he missed again, and a withheld
// caller and an extension missed too.
func cbScenario() []cbCall {
	return []cbCall{
		{provider: "sip", id: "ada-1", dir: "inbound", party: e164(cbAda), start: 0, locations: `["north"]`},
		{provider: "sip", id: "ada-2", dir: "inbound", party: e164(cbAda), start: 100, locations: `["south"]`},
		{provider: "ringcentral", id: "ada-back", dir: "outbound", party: e164(cbAda), start: 200, ext: "201"},
		{provider: "sip", id: "bob-1", dir: "inbound", party: e164(cbBob), start: 50, voicemail: true},
		{provider: "sip", id: "carla-1", dir: "inbound", party: e164(cbCarla), start: 60},
		{provider: "sip", id: "carla-2", dir: "inbound", party: e164(cbCarla), start: 300, answeredBy: "202"},
		{provider: "sip", id: "dan-1", dir: "inbound", party: e164(cbDan), start: 70},
		{provider: "sip", id: "dan-back", dir: "internal", party: e164(cbDan), start: 80, ext: "203"},
		{provider: "sip", id: "dan-2", dir: "inbound", party: e164(cbDan), start: 400},
		{provider: "sip", id: "anon-1", dir: "inbound", party: `{"kind":"anonymous"}`, start: 10},
		{provider: "sip", id: "ext-1", dir: "inbound", party: `{"kind":"extension","extension":"204"}`, start: 20},
	}
}

// cbWant is the scenario's list, each item but its ids, which depend on the organization.
func cbWant(org string) (open, closed []store.Callback) {
	id := func(provider, pid string) string { return store.CallID(org, provider, pid) }
	open = []store.Callback{
		{Number: cbDan, MissedCount: 1, FirstMissedAt: at(400), LastMissedAt: at(400), LastCallID: id("sip", "dan-2"),
			Locations: []string{"main"}, Open: true},
		{Number: cbBob, MissedCount: 1, FirstMissedAt: at(50), LastMissedAt: at(50), LastCallID: id("sip", "bob-1"),
			Locations: []string{"main"}, Voicemail: true, Open: true},
	}
	closed = []store.Callback{
		{Number: cbAda, MissedCount: 2, FirstMissedAt: at(0), LastMissedAt: at(100), LastCallID: id("sip", "ada-2"),
			Locations: []string{"north", "south"}, ClosedAt: at(200),
			ClosedBy: &store.CallbackClose{Reason: store.CallbackCalledBack, CallID: id("ringcentral", "ada-back"), Extension: "201"}},
		{Number: cbCarla, MissedCount: 1, FirstMissedAt: at(60), LastMissedAt: at(60), LastCallID: id("sip", "carla-1"),
			Locations: []string{"main"}, ClosedAt: at(305),
			ClosedBy: &store.CallbackClose{Reason: store.CallbackAnswered, CallID: id("sip", "carla-2"), Extension: "202"}},
	}
	// The list is newest miss first.
	slices.SortFunc(closed, func(a, b store.Callback) int { return b.LastMissedAt.Compare(a.LastMissedAt) })
	return open, closed
}

// listAll walks every page of the list, limit items a page.
func listAll(t *testing.T, s store.CallbackStore, org string, f store.CallbackFilter, limit int) []store.Callback {
	t.Helper()
	var out []store.Callback
	var after *store.CallbackPosition
	for range 1000 {
		page, err := s.ListCallbacks(t.Context(), org, f, after, limit)
		if err != nil {
			t.Fatalf("ListCallbacks: %v", err)
		}
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		p := page[len(page)-1].Position()
		after = &p
	}
	t.Fatal("ListCallbacks: more than 1000 pages")
	return nil
}

// checkCallbacks asserts that the list is want, in order.
func checkCallbacks(t *testing.T, how string, got, want []store.Callback) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d items %v, want %d %v", how, len(got), numbersOf(got), len(want), numbersOf(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		sameTime(t, how+" "+w.Number+": FirstMissedAt", g.FirstMissedAt, w.FirstMissedAt)
		sameTime(t, how+" "+w.Number+": LastMissedAt", g.LastMissedAt, w.LastMissedAt)
		sameTime(t, how+" "+w.Number+": ClosedAt", g.ClosedAt, w.ClosedAt)
		g.FirstMissedAt, g.LastMissedAt, g.ClosedAt = w.FirstMissedAt, w.LastMissedAt, w.ClosedAt
		if (g.ClosedBy == nil) != (w.ClosedBy == nil) || (g.ClosedBy != nil && *g.ClosedBy != *w.ClosedBy) {
			t.Errorf("%s %s: ClosedBy = %+v, want %+v", how, w.Number, g.ClosedBy, w.ClosedBy)
		}
		g.ClosedBy, w.ClosedBy = nil, nil
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
			t.Errorf("%s: item %d =\n %+v\nwant\n %+v", how, i, g, w)
		}
	}
}

func numbersOf(cbs []store.Callback) []string {
	var out []string
	for _, c := range cbs {
		out = append(out, c.Number)
	}
	return out
}

// checkScenario asserts that org's list is the scenario's.
func checkScenario(t *testing.T, s cbStore, org, how string) {
	t.Helper()
	open, closed := cbWant(org)
	checkCallbacks(t, how+": open", listAll(t, s, org, store.CallbackFilter{Open: true}, 50), open)
	checkCallbacks(t, how+": closed", listAll(t, s, org, store.CallbackFilter{}, 50), closed)
}

// writeEach writes each call write on its own.
func writeEach(t *testing.T, s store.Store, org string, ws []store.CallWrite) {
	t.Helper()
	for _, w := range ws {
		write(t, s, refresh(store.Write{OrgID: org, ReceivedAt: at(1000), Calls: []store.CallWrite{w}}))
	}
}

// scenarioWrites returns every write of the scenario's calls, in order.
func scenarioWrites() []store.CallWrite {
	var ws []store.CallWrite
	for _, c := range cbScenario() {
		ws = append(ws, c.writes()...)
	}
	return ws
}

// callbackTests covers the to-call-back list (store.CallbackStore).
func callbackTests() []contractTest {
	orders := map[string]func([]store.CallWrite) []store.CallWrite{
		"InOrder":  func(ws []store.CallWrite) []store.CallWrite { return ws },
		"Reversed": func(ws []store.CallWrite) []store.CallWrite { slices.Reverse(ws); return ws },
		"Shuffled": func(ws []store.CallWrite) []store.CallWrite {
			r := rand.New(rand.NewPCG(48, 2))
			r.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
			return ws
		},
		"Repeated": func(ws []store.CallWrite) []store.CallWrite {
			r := rand.New(rand.NewPCG(48, 3))
			out := slices.Concat(ws, ws, ws)
			r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			return out
		},
	}
	var tests []contractTest
	for name, order := range orders {
		tests = append(tests, contractTest{name, func(t *testing.T, s store.Store) {
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			writeEach(t, s, org, order(scenarioWrites()))
			checkScenario(t, cs, org, name)
		}})
	}
	tests = append(tests,
		contractTest{"OneWrite", func(t *testing.T, s store.Store) {
			// Every call's end in one write, after every call's start in another.
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			var starts, ends []store.CallWrite
			for _, c := range cbScenario() {
				w := c.writes()
				starts, ends = append(starts, w[0]), append(ends, w[1])
			}
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(1000), Calls: starts})
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(1000), Calls: ends})
			checkScenario(t, cs, org, "two writes")
		}},
		contractTest{"UnparseableByText", func(t *testing.T, s store.Store) {
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			writeEach(t, s, org, cbCall{provider: "sip", id: "u-1", dir: "inbound", start: 5,
				party: `{"kind":"unknown","uri":"sip:0101-555@pbx.example","name":"RECEPTION"}`}.writes())
			got := listAll(t, cs, org, store.CallbackFilter{Open: true}, 10)
			if len(got) != 1 || got[0].Number != "sip:0101-555@pbx.example" {
				t.Fatalf("open items = %v, want the one of sip:0101-555@pbx.example", numbersOf(got))
			}
		}},
		contractTest{"DismissBetweenMisses", func(t *testing.T, s store.Store) {
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			first := cbCall{provider: "sip", id: "m-1", dir: "inbound", party: e164(cbAda), start: 0}
			second := cbCall{provider: "sip", id: "m-2", dir: "inbound", party: e164(cbAda), start: 600}
			writeEach(t, s, org, first.writes())
			_, err := cs.DismissCallback(t.Context(), org, cbBob, at(100), "201")
			wantErr(t, "DismissCallback of a number without an item", err, store.ErrNotFound)
			cb, err := cs.DismissCallback(t.Context(), org, cbAda, at(100), "201")
			if err != nil {
				t.Fatalf("DismissCallback: %v", err)
			}
			want := store.Callback{Number: cbAda, MissedCount: 1, FirstMissedAt: at(0), LastMissedAt: at(0),
				LastCallID: store.CallID(org, "sip", "m-1"), Locations: []string{"main"}, ClosedAt: at(100),
				ClosedBy: &store.CallbackClose{Reason: store.CallbackDismissed, Extension: "201"}}
			checkCallbacks(t, "dismissed", []store.Callback{cb}, []store.Callback{want})
			_, err = cs.DismissCallback(t.Context(), org, cbAda, at(110), "")
			wantErr(t, "DismissCallback of a closed item", err, store.ErrNotFound)
			// A miss after the dismissal opens a new item; the first miss's late repeat does not.
			writeEach(t, s, org, second.writes())
			writeEach(t, s, org, first.writes())
			checkCallbacks(t, "a miss after the dismissal", listAll(t, cs, org, store.CallbackFilter{Open: true}, 10),
				[]store.Callback{{Number: cbAda, MissedCount: 1, FirstMissedAt: at(600), LastMissedAt: at(600),
					LastCallID: store.CallID(org, "sip", "m-2"), Locations: []string{"main"}, Open: true}})
		}},
		contractTest{"NeedsAnswer", func(t *testing.T, s store.Store) {
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			if v, err := cs.CallbackNeedsAnswer(t.Context(), org); err != nil || v {
				t.Fatalf("CallbackNeedsAnswer of a new organization = %v, %v; want false", v, err)
			}
			writeEach(t, s, org, slices.Concat(
				cbCall{provider: "sip", id: "m", dir: "inbound", party: e164(cbAda), start: 0}.writes(),
				cbCall{provider: "sip", id: "o", dir: "outbound", party: e164(cbAda), start: 60, ext: "201"}.writes()))
			if got := listAll(t, cs, org, store.CallbackFilter{Open: true}, 10); len(got) != 0 {
				t.Fatalf("an unanswered attempt left %v open", numbersOf(got))
			}
			if err := cs.SetCallbackNeedsAnswer(t.Context(), org, true); err != nil {
				t.Fatalf("SetCallbackNeedsAnswer: %v", err)
			}
			if v, err := cs.CallbackNeedsAnswer(t.Context(), org); err != nil || !v {
				t.Fatalf("CallbackNeedsAnswer = %v, %v; want true", v, err)
			}
			if got := listAll(t, cs, org, store.CallbackFilter{Open: true}, 10); len(got) != 1 {
				t.Fatalf("with the setting, open items = %v, want %s", numbersOf(got), cbAda)
			}
			writeEach(t, s, org, cbCall{provider: "sip", id: "o2", dir: "outbound", party: e164(cbAda), start: 90,
				ext: "202", answeredBy: cbAda}.writes())
			got := listAll(t, cs, org, store.CallbackFilter{}, 10)
			if len(got) != 1 || got[0].ClosedBy == nil || got[0].ClosedBy.CallID != store.CallID(org, "sip", "o2") {
				t.Fatalf("closed items = %+v, want %s closed by o2", got, cbAda)
			}
			wantErr(t, "SetCallbackNeedsAnswer of no organization",
				cs.SetCallbackNeedsAnswer(t.Context(), newID(), true), store.ErrNotFound)
			_, err := cs.CallbackNeedsAnswer(t.Context(), newID())
			wantErr(t, "CallbackNeedsAnswer of no organization", err, store.ErrNotFound)
		}},
		contractTest{"Paging", func(t *testing.T, s store.Store) {
			// Pages of 3 over 10 open items, while other numbers miss and items close: each
			// item on file through the walk is listed once, in order.
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			num := func(i int) string { return fmt.Sprintf("+1555010%04d", i) }
			for i := range 10 {
				writeEach(t, s, org, cbCall{provider: "sip", id: fmt.Sprint("p-", i), dir: "inbound", party: e164(num(i)),
					start: i * 10}.writes())
			}
			// Two items share one instant, so that the number breaks the tie.
			writeEach(t, s, org, cbCall{provider: "sip", id: "p-tie", dir: "inbound", party: e164(num(99)), start: 50}.writes())
			var got []string
			var after *store.CallbackPosition
			for page := 0; ; page++ {
				items, err := cs.ListCallbacks(t.Context(), org, store.CallbackFilter{Open: true}, after, 3)
				if err != nil {
					t.Fatalf("ListCallbacks: %v", err)
				}
				got = append(got, numbersOf(items)...)
				if page == 1 {
					// Meanwhile: a newer miss (after the walk's start), and a callback to an
					// item not yet listed.
					writeEach(t, s, org, cbCall{provider: "sip", id: "p-new", dir: "inbound", party: e164(num(50)), start: 500}.writes())
					writeEach(t, s, org, cbCall{provider: "sip", id: "p-back", dir: "outbound", party: e164(num(1)), start: 600, ext: "201"}.writes())
				}
				if len(items) < 3 {
					break
				}
				p := items[len(items)-1].Position()
				after = &p
			}
			want := []string{num(9), num(8), num(7), num(6), num(99), num(5), num(4), num(3), num(2), num(0)}
			if !slices.Equal(got, want) {
				t.Fatalf("walked %v, want %v", got, want)
			}
			_, err := cs.ListCallbacks(t.Context(), org, store.CallbackFilter{}, nil, store.MaxCallbackLimit+1)
			wantErr(t, "ListCallbacks over the limit", err, store.ErrInvalid)
		}},
		contractTest{"Location", func(t *testing.T, s store.Store) {
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			writeEach(t, s, org, scenarioWrites())
			got := listAll(t, cs, org, store.CallbackFilter{Location: "south"}, 10)
			if len(got) != 1 || got[0].Number != cbAda {
				t.Fatalf("closed items in south = %v, want %s", numbersOf(got), cbAda)
			}
			if got := listAll(t, cs, org, store.CallbackFilter{Open: true, Location: "south"}, 10); len(got) != 0 {
				t.Fatalf("open items in south = %v, want none", numbersOf(got))
			}
		}},
		contractTest{"Isolation", func(t *testing.T, s store.Store) {
			cs := asCallbacks(t, s)
			org, other := newOrg(t, s), newOrg(t, s)
			writeEach(t, s, org, scenarioWrites())
			if got := listAll(t, cs, other, store.CallbackFilter{Open: true}, 10); len(got) != 0 {
				t.Fatalf("another organization lists %v", numbersOf(got))
			}
			_, err := cs.DismissCallback(t.Context(), other, cbDan, at(1000), "")
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("another organization's dismissal: %v, want ErrNotFound", err)
			}
		}},
	)
	return tests
}

// randomCallbackWrites returns the writes of n random calls of a few numbers, shuffled, some
// repeated: inbound calls that ring, are answered or not, reach voicemail or not, and are
// sometimes re-identified by a later event as coming from another number; and outbound calls to
// those numbers, answered or not. It is what makes a store's upkeep skip numbers, move calls
// between numbers, and see writes late, twice and out of order.
func randomCallbackWrites(r *rand.Rand, n int) []store.CallWrite {
	numbers := []string{`{"kind":"unknown","uri":"sip:unparsed@pbx.example"}`, `{"kind":"anonymous"}`}
	for k := range 10 {
		numbers = append(numbers, e164(fmt.Sprintf("+1555020%04d", k)))
	}
	var out []store.CallWrite
	for i := range n {
		c := cbCall{provider: "sip", id: fmt.Sprint("r-", i), dir: "inbound", party: numbers[r.IntN(len(numbers))],
			start: r.IntN(3600)}
		switch r.IntN(6) {
		case 0:
			c.dir, c.ext = "outbound", "201"
		case 1:
			c.voicemail = true
		case 2, 3:
			c.answeredBy = "202"
		}
		if c.dir == "outbound" && r.IntN(2) == 0 {
			c.answeredBy = "outside"
		}
		ws := c.writes()
		if r.IntN(3) == 0 {
			// A later event names another party: the call moves to that number.
			moved := c
			moved.party = numbers[r.IntN(len(numbers))]
			m := moved.writes()[1]
			m.Events, m.State = []store.EventWrite{ev("call_updated", 9, at(c.start+40))}, store.StateRinging
			m.BlockSequence, m.BlockAt, m.FirstAt, m.LastAt = 9, at(c.start+40), at(c.start+40), at(c.start+40)
			m.Summary.AnsweredAt, m.Summary.AnsweredBy, m.Summary.EndedAt, m.Summary.Flags = time.Time{}, "", time.Time{}, 0
			ws = append(ws, m)
		}
		if r.IntN(5) == 0 {
			ws = ws[:1] // still ringing, or its end never reported
		}
		out = append(out, ws...)
		if r.IntN(5) == 0 {
			out = append(out, ws[r.IntN(len(ws))]) // sent twice
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// recomputedCallbacks returns the items store.CallbackOf gives for every number the
// organization's calls on file count toward, with no dismissals: open and closed apart, each
// in the list's order.
func recomputedCallbacks(t *testing.T, s cbStore, org string, needsAnswer bool) (open, closed []store.Callback) {
	t.Helper()
	byNumber := map[string][]store.CallbackCall{}
	var after *store.CallPosition
	for {
		page, err := s.ListCalls(t.Context(), org, store.CallFilter{}, after, store.MaxListLimit)
		if err != nil {
			t.Fatalf("ListCalls: %v", err)
		}
		for _, rec := range page {
			if n, ok := store.CallbackParty(rec.Call.Direction, rec.Call.Block); ok {
				byNumber[n] = append(byNumber[n], store.CallbackCallOf(rec.Call))
			}
		}
		if len(page) < store.MaxListLimit {
			break
		}
		p := page[len(page)-1].Call.Position()
		after = &p
	}
	for n, calls := range byNumber {
		if cb, ok := store.CallbackOf(n, calls, nil, needsAnswer); ok {
			if cb.Open {
				open = append(open, cb)
			} else {
				closed = append(closed, cb)
			}
		}
	}
	order := func(a, b store.Callback) int {
		if c := b.LastMissedAt.Compare(a.LastMissedAt); c != 0 {
			return c
		}
		return strings.Compare(b.Number, a.Number)
	}
	slices.SortFunc(open, order)
	slices.SortFunc(closed, order)
	return open, closed
}

// callbackRecomputeTests check that what a store keeps is what recomputing every item from the
// calls on file gives, however the writes came: the upkeep may skip a number only when the write
// cannot have changed its item.
func callbackRecomputeTests() []contractTest {
	var tests []contractTest
	for _, seed := range []uint64{1, 2, 3, 4} {
		tests = append(tests, contractTest{fmt.Sprint("MatchesRecompute/", seed), func(t *testing.T, s store.Store) {
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			r := rand.New(rand.NewPCG(seed, 48))
			ws := randomCallbackWrites(r, 40)
			for len(ws) > 0 {
				// One to three calls a write, each call once.
				k := min(1+r.IntN(3), len(ws))
				var batch []store.CallWrite
				for _, w := range ws[:k] {
					if !slices.ContainsFunc(batch, func(b store.CallWrite) bool { return sameKey(b, w) }) {
						batch = append(batch, w)
					}
				}
				write(t, s, refresh(store.Write{OrgID: org, ReceivedAt: at(5000), Calls: batch}))
				ws = ws[len(batch):]
			}
			// As written, then after the setting's changes recompute every item.
			for k, needsAnswer := range []bool{false, true, false} {
				if k > 0 {
					if err := cs.SetCallbackNeedsAnswer(t.Context(), org, needsAnswer); err != nil {
						t.Fatalf("SetCallbackNeedsAnswer: %v", err)
					}
				}
				open, closed := recomputedCallbacks(t, cs, org, needsAnswer)
				how := fmt.Sprintf("needsAnswer=%v", needsAnswer)
				checkCallbacks(t, how+": open", listAll(t, cs, org, store.CallbackFilter{Open: true}, 7), open)
				checkCallbacks(t, how+": closed", listAll(t, cs, org, store.CallbackFilter{}, 7), closed)
			}
		}})
	}
	return tests
}

// sameKey reports whether a and b write the same call.
func sameKey(a, b store.CallWrite) bool {
	return a.Provider == b.Provider && a.ProviderCallID == b.ProviderCallID
}

// callbackRaceTests check the list under concurrent writers of one number: a miss and the
// callback that settles it, written at the same moment by two reporters, must leave the item
// closed whichever commits first, and a second miss racing a first must count both.
func callbackRaceTests() []contractTest {
	return []contractTest{{"RacingWritersOfOneNumber", func(t *testing.T, s store.Store) {
		cs := asCallbacks(t, s)
		org := newOrg(t, s)
		const numbers = 24
		var writes [][]store.CallWrite
		for k := range numbers {
			n := e164(fmt.Sprintf("+1555030%04d", k))
			miss := cbCall{provider: "sip", id: fmt.Sprint("race-miss-", k), dir: "inbound", party: n, start: 10 * k}
			back := cbCall{provider: "ringcentral", id: fmt.Sprint("race-back-", k), dir: "outbound", party: n,
				start: 10*k + 5, ext: "201"}
			other := cbCall{provider: "asterisk", id: fmt.Sprint("race-miss2-", k), dir: "inbound", party: n, start: 10*k + 1}
			// Each call whole in one write, as a reporter that sends a call when it ends does.
			whole := func(c cbCall) []store.CallWrite {
				ws := c.writes()
				w := ws[1]
				w.Events = append(append([]store.EventWrite{}, ws[0].Events...), ws[1].Events...)
				w.FirstAt = ws[0].FirstAt
				return []store.CallWrite{w}
			}
			writes = append(writes, whole(miss), whole(back), whole(other))
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, len(writes))
		for i, cw := range writes {
			w := refresh(store.Write{OrgID: org, ReceivedAt: at(5000), Calls: cw})
			wg.Go(func() {
				<-start
				_, errs[i] = s.WriteCalls(t.Context(), w)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil && !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("write %d: %v", i, err)
			}
			if err != nil {
				// A write that lost a race is sent again, as a reporter would.
				write(t, s, refresh(store.Write{OrgID: org, ReceivedAt: at(5000), Calls: writes[i]}))
			}
		}
		open, closed := recomputedCallbacks(t, cs, org, false)
		if len(open) != 0 || len(closed) != numbers {
			t.Fatalf("a recompute gives %d open and %d closed items, want 0 and %d", len(open), len(closed), numbers)
		}
		checkCallbacks(t, "open", listAll(t, cs, org, store.CallbackFilter{Open: true}, 50), open)
		checkCallbacks(t, "closed", listAll(t, cs, org, store.CallbackFilter{}, 50), closed)
	}}}
}
