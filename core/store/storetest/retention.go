package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// retentionTests covers an organization's RetentionDays and PurgeCalls.
func retentionTests() []contractTest {
	// oldCall writes call id under org with events ordered at first and first+1s, received at
	// received.
	oldCall := func(t *testing.T, s store.Store, org, id string, st store.State, first int, received time.Time) {
		t.Helper()
		write(t, s, store.Write{OrgID: org, ReceivedAt: received, Calls: []store.CallWrite{
			cw("sip", id, st, ev("call_received", 1, at(first)), ev("call_answered", 2, at(first+1))),
		}})
	}
	purge := func(t *testing.T, s store.Store, org string, cutoff time.Time, limit int) store.Purged {
		t.Helper()
		p, err := s.PurgeCalls(t.Context(), org, cutoff, limit)
		if err != nil {
			t.Fatalf("PurgeCalls: %v", err)
		}
		return p
	}
	return []contractTest{
		{"CallbacksOfPurgedCalls", func(t *testing.T, s store.Store) {
			// An open item whose misses are purged closes as expired; an item with a miss left
			// keeps it; an item closed before the purge stays closed as it was.
			cs := asCallbacks(t, s)
			org := newOrg(t, s)
			writeEach(t, s, org, slices.Concat(
				cbCall{provider: "sip", id: "old-ada", dir: "inbound", party: e164(cbAda), start: 0}.writes(),
				cbCall{provider: "sip", id: "old-bob", dir: "inbound", party: e164(cbBob), start: 10}.writes(),
				cbCall{provider: "sip", id: "new-bob", dir: "inbound", party: e164(cbBob), start: 5000}.writes(),
				cbCall{provider: "sip", id: "old-carla", dir: "inbound", party: e164(cbCarla), start: 20}.writes(),
				cbCall{provider: "sip", id: "carla-back", dir: "outbound", party: e164(cbCarla), start: 30, ext: "201"}.writes()))
			// Every call was written at at(1000): a cutoff at at(4000) removes all but new-bob.
			if p := purge(t, s, org, at(4000), 100); p.Calls != 4 {
				t.Fatalf("purged %d calls, want 4", p.Calls)
			}
			byNumber := map[string]store.Callback{}
			for _, cb := range slices.Concat(listAll(t, cs, org, store.CallbackFilter{Open: true}, 10),
				listAll(t, cs, org, store.CallbackFilter{}, 10)) {
				byNumber[cb.Number] = cb
			}
			if cb := byNumber[cbAda]; cb.Open || cb.ClosedBy == nil || cb.ClosedBy.Reason != store.CallbackExpired {
				t.Errorf("%s after its misses were purged: %+v, want closed as %s", cbAda, cb, store.CallbackExpired)
			}
			if cb := byNumber[cbBob]; !cb.Open || cb.MissedCount != 1 || cb.LastCallID != store.CallID(org, "sip", "new-bob") {
				t.Errorf("%s with a miss left: %+v, want open with that miss", cbBob, cb)
			}
			if cb := byNumber[cbCarla]; cb.Open || cb.ClosedBy == nil || cb.ClosedBy.Reason != store.CallbackCalledBack {
				t.Errorf("%s, called back before the purge: %+v, want closed as %s", cbCarla, cb, store.CallbackCalledBack)
			}
			// A new miss opens a new item; a settling call leaves an expired one as it is.
			writeEach(t, s, org, slices.Concat(
				cbCall{provider: "sip", id: "ada-again", dir: "inbound", party: e164(cbAda), start: 9000}.writes(),
				cbCall{provider: "sip", id: "carla-again", dir: "inbound", party: e164(cbCarla), start: 9000, answeredBy: "202"}.writes()))
			purge(t, s, org, at(8000), 100) // new-bob: Bob's open item expires
			writeEach(t, s, org, cbCall{provider: "sip", id: "bob-answered", dir: "inbound", party: e164(cbBob), start: 9500,
				answeredBy: "202"}.writes())
			open := listAll(t, cs, org, store.CallbackFilter{Open: true}, 10)
			if len(open) != 1 || open[0].Number != cbAda || open[0].MissedCount != 1 {
				t.Fatalf("open items after a new miss = %+v, want %s's new item", open, cbAda)
			}
			for _, cb := range listAll(t, cs, org, store.CallbackFilter{}, 10) {
				if cb.Number == cbBob && (cb.ClosedBy == nil || cb.ClosedBy.Reason != store.CallbackExpired) {
					t.Errorf("%s after an answered call: %+v, want still closed as %s", cbBob, cb, store.CallbackExpired)
				}
			}
		}},
		{"SettingDefaultsToForever", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			o, err := s.GetOrg(t.Context(), org)
			if err != nil || o.RetentionDays != 0 {
				t.Fatalf("GetOrg = %+v, %v; want RetentionDays 0", o, err)
			}
			kept := store.Org{ID: newID(), Name: "kept", CreatedAt: at(1), RetentionDays: 30}
			if err := s.CreateOrg(t.Context(), kept); err != nil {
				t.Fatalf("CreateOrg: %v", err)
			}
			if o, _ := s.GetOrg(t.Context(), kept.ID); o.RetentionDays != 30 {
				t.Errorf("RetentionDays after create = %d, want 30", o.RetentionDays)
			}
		}},
		{"SettingUpdates", func(t *testing.T, s store.Store) {
			org, other := newOrg(t, s), newOrg(t, s)
			for _, days := range []int{7, store.MaxRetentionDays, 0, 1} {
				if err := s.UpdateOrgRetention(t.Context(), org, days); err != nil {
					t.Fatalf("UpdateOrgRetention %d: %v", days, err)
				}
				orgs, err := s.ListOrgs(t.Context())
				if err != nil {
					t.Fatalf("ListOrgs: %v", err)
				}
				for _, o := range orgs {
					if o.ID == org && o.RetentionDays != days {
						t.Errorf("RetentionDays = %d, want %d", o.RetentionDays, days)
					}
					if o.ID == other && o.RetentionDays != 0 {
						t.Errorf("another organization's RetentionDays = %d, want 0", o.RetentionDays)
					}
				}
			}
			for _, days := range []int{-1, store.MaxRetentionDays + 1} {
				wantErr(t, fmt.Sprintf("UpdateOrgRetention %d", days), s.UpdateOrgRetention(t.Context(), org, days), store.ErrInvalid)
				err := s.CreateOrg(t.Context(), store.Org{ID: newID(), Name: "bad", CreatedAt: at(1), RetentionDays: days})
				wantErr(t, fmt.Sprintf("CreateOrg retention %d", days), err, store.ErrInvalid)
			}
			if o, _ := s.GetOrg(t.Context(), org); o.RetentionDays != 1 {
				t.Errorf("after refused updates RetentionDays = %d, want 1", o.RetentionDays)
			}
			wantErr(t, "UpdateOrgRetention unknown", s.UpdateOrgRetention(t.Context(), newID(), 3), store.ErrNotFound)
		}},
		{"PurgeRemovesOnlyWhatIsDue", func(t *testing.T, s store.Store) {
			org, other := newOrg(t, s), newOrg(t, s)
			oldCall(t, s, org, "ended", store.StateEnded, 0, at(10))
			oldCall(t, s, org, "ringing", store.StateRinging, 5, at(10))
			oldCall(t, s, org, "recent", store.StateEnded, 1000, at(1001))
			// Its events are old, but it was written to after the cutoff.
			oldCall(t, s, org, "written-late", store.StateEnded, 0, at(600))
			// Its last event is at the cutoff itself: not before it.
			oldCall(t, s, org, "at-cutoff", store.StateEnded, 499, at(400))
			oldCall(t, s, other, "ended", store.StateEnded, 0, at(10))
			if p := purge(t, s, org, at(500), 100); p != (store.Purged{Calls: 2, Events: 4}) {
				t.Errorf("PurgeCalls = %+v, want 2 calls and 4 events", p)
			}
			wantNoCall(t, s, org, "sip", "ended")
			wantNoCall(t, s, org, "sip", "ringing")
			for _, id := range []string{"recent", "written-late", "at-cutoff"} {
				if _, evs := getCall(t, s, org, "sip", id); len(evs) != 2 {
					t.Errorf("call %s has %d events, want 2", id, len(evs))
				}
			}
			if _, evs := getCall(t, s, other, "sip", "ended"); len(evs) != 2 {
				t.Errorf("another organization's call has %d events, want 2", len(evs))
			}
			if p := purge(t, s, org, at(500), 100); p != (store.Purged{}) {
				t.Errorf("PurgeCalls again = %+v, want nothing", p)
			}
			recs, err := s.ListCalls(t.Context(), org, store.CallFilter{}, nil, store.MaxListLimit)
			if err != nil || len(recs) != 3 {
				t.Errorf("ListCalls after purge: %d calls, %v; want 3", len(recs), err)
			}
		}},
		{"PurgeInBatches", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			for i := range 5 {
				oldCall(t, s, org, fmt.Sprintf("c%d", i), store.StateEnded, i*10, at(100))
			}
			for i, want := range []int{2, 2, 1, 0} {
				p := purge(t, s, org, at(500), 2)
				if p.Calls != want || p.Events != 2*want {
					t.Errorf("batch %d = %+v, want %d calls and %d events", i, p, want, 2*want)
				}
			}
			// Oldest start first: after one batch of 1 on fresh calls, the oldest is gone.
			oldCall(t, s, org, "young", store.StateEnded, 50, at(100))
			oldCall(t, s, org, "old", store.StateEnded, 1, at(100))
			purge(t, s, org, at(500), 1)
			wantNoCall(t, s, org, "sip", "old")
			getCall(t, s, org, "sip", "young")
			_, err := s.PurgeCalls(t.Context(), org, at(500), 0)
			wantErr(t, "PurgeCalls limit 0", err, store.ErrInvalid)
		}},
		{"LateEventCreatesTheCallAnew", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			oldCall(t, s, org, "late", store.StateAnswered, 0, at(10))
			purge(t, s, org, at(500), 10)
			late := cw("sip", "late", store.StateEnded, ev("call_ended", 3, at(2)))
			res := write(t, s, store.Write{OrgID: org, ReceivedAt: at(900), Calls: []store.CallWrite{late}})
			if !res[0].Created || res[0].ID != callID(org, late) || res[0].Events[0].Duplicate {
				t.Errorf("late write result = %+v, want the call created anew under its id", res[0])
			}
			c, evs := getCall(t, s, org, "sip", "late")
			if len(evs) != 1 || evs[0].Type != "call_ended" || c.State != store.StateEnded {
				t.Errorf("call anew: state %v, %d events; want ended with the late event only", c.State, len(evs))
			}
		}},
		{"PurgeWhileWriting", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			const calls = 8
			for i := range calls {
				oldCall(t, s, org, fmt.Sprintf("c%d", i), store.StateAnswered, i, at(10))
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2*calls+1)
			for i := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for seq := range int64(5) {
						// Old events, received long ago: the call stays due.
						w := store.Write{OrgID: org, ReceivedAt: at(20), Calls: []store.CallWrite{
							cw("sip", fmt.Sprintf("c%d", i), store.StateAnswered, ev("note", 10+seq, at(i+2))),
						}}
						if _, err := s.WriteCalls(t.Context(), w); err != nil {
							errs <- fmt.Errorf("WriteCalls c%d: %w", i, err)
							return
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					if _, err := s.PurgeCalls(t.Context(), org, at(500), 3); err != nil {
						errs <- fmt.Errorf("PurgeCalls: %w", err)
						return
					}
				}
			}()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for i := range calls {
				c, evs, err := s.GetCall(t.Context(), org, "sip", fmt.Sprintf("c%d", i))
				if err != nil {
					continue
				}
				for _, e := range evs {
					if e.CallID != c.ID {
						t.Errorf("call c%d holds event of call %s", i, e.CallID)
					}
				}
			}
			for {
				p := purge(t, s, org, at(500), 3)
				if p.Calls == 0 {
					break
				}
			}
			for i := range calls {
				wantNoCall(t, s, org, "sip", fmt.Sprintf("c%d", i))
			}
		}},
	}
}
