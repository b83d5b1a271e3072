package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// concurrencyTests covers racing writers: exactly-once creation and deadlock freedom.
func concurrencyTests() []contractTest {
	return []contractTest{
		{"IdenticalWritesRace", func(t *testing.T, s store.Store) {
			const writers = 50
			org := newOrg(t, s)
			w := store.Write{OrgID: org, ReceivedAt: at(10), Calls: []store.CallWrite{
				cw("sip", "race", store.StateEnded,
					ev("call_received", 1, at(1)), ev("call_answered", 2, at(2)), ev("call_ended", 3, at(3))),
			}}
			results := make([][]store.CallResult, writers)
			errs := make([]error, writers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range writers {
				// Each writer is its own request, with its own fresh identifiers.
				wi := refresh(w)
				wg.Go(func() {
					<-start
					results[i], errs[i] = s.WriteCalls(t.Context(), wi)
				})
			}
			close(start)
			wg.Wait()

			created := 0
			stored := make([]int, len(w.Calls[0].Events))
			var callID string
			var ids []string
			for i := range writers {
				if errs[i] != nil {
					t.Errorf("writer %d: %v", i, errs[i])
					continue
				}
				if len(results[i]) != 1 || len(results[i][0].Events) != len(stored) {
					t.Fatalf("writer %d got malformed results %+v", i, results[i])
				}
				r := results[i][0]
				if r.Created {
					created++
				}
				if callID == "" {
					callID, ids = r.ID, resultIDs(r)
				}
				if r.ID != callID || !slices.Equal(resultIDs(r), ids) {
					t.Errorf("writer %d saw call %q events %q; another saw call %q events %q", i, r.ID, resultIDs(r), callID, ids)
				}
				for j, e := range r.Events {
					if !e.Duplicate {
						stored[j]++
					}
				}
			}
			if created != 1 {
				t.Errorf("%d writers saw Created, want exactly 1", created)
			}
			for j, n := range stored {
				if n != 1 {
					t.Errorf("event %d reported stored (not duplicate) by %d writers, want exactly 1", j, n)
				}
			}
			got, evs := getCall(t, s, org, "sip", "race")
			if got.ID != callID {
				t.Errorf("stored call ID = %q, writers saw %q", got.ID, callID)
			}
			if !slices.Equal(eventIDs(evs), ids) {
				t.Errorf("stored event IDs = %q, writers saw %q", eventIDs(evs), ids)
			}
		}},
		{"OppositeOrderNoDeadlock", func(t *testing.T, s store.Store) {
			const (
				writers    = 4
				iterations = 40
			)
			org := newOrg(t, s)
			errs := make(chan error, writers*iterations)
			callIDs := make([]map[string]string, writers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for g := range writers {
				callIDs[g] = map[string]string{}
				wg.Go(func() {
					<-start
					for i := range iterations {
						seq := int64(g*iterations + i + 1)
						a := cw("sip", "call-a", store.StateAnswered, ev("call_hold", seq, at(int(seq))))
						b := cw("sip", "call-b", store.StateAnswered, ev("call_hold", seq, at(int(seq))))
						calls := []store.CallWrite{a, b}
						if g%2 == 1 {
							calls = []store.CallWrite{b, a}
						}
						res, err := s.WriteCalls(t.Context(), store.Write{OrgID: org, ReceivedAt: at(int(seq)), Calls: calls})
						if err != nil {
							errs <- fmt.Errorf("writer %d iteration %d: %w", g, i, err)
							continue
						}
						for k, r := range res {
							key := calls[k].ProviderCallID
							if prev, ok := callIDs[g][key]; ok && prev != r.ID {
								errs <- fmt.Errorf("writer %d: %s has ID %q, earlier %q", g, key, r.ID, prev)
							}
							callIDs[g][key] = r.ID
							if len(r.Events) != 1 || r.Events[0].Duplicate || r.Events[0].ID != calls[k].Events[0].ID {
								errs <- fmt.Errorf("writer %d: %s event result %+v, want new event %q", g, key, r.Events, calls[k].Events[0].ID)
							}
						}
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for _, key := range []string{"call-a", "call-b"} {
				got, evs := getCall(t, s, org, "sip", key)
				if len(evs) != writers*iterations {
					t.Errorf("%s has %d events, want %d", key, len(evs), writers*iterations)
				}
				for g := range writers {
					if id := callIDs[g][key]; id != got.ID {
						t.Errorf("writer %d saw %s as %q, stored %q", g, key, id, got.ID)
					}
				}
			}
		}},
	}
}
