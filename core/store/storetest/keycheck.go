package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// keyCheckTests covers KeyCheck: the guard that proves a key live in the same transaction as the
// read or write it guards.
func keyCheckTests() []contractTest {
	type setup struct {
		org   string
		key   store.Key
		check *store.KeyCheck
	}
	prepare := func(t *testing.T, s store.Store) setup {
		org := newOrg(t, s)
		k := newKey(org, at(0))
		exp := at(0).Add(time.Hour)
		k.ExpiresAt = &exp
		createKey(t, s, k)
		return setup{org: org, key: k, check: &store.KeyCheck{ClientID: k.ClientID, SecretHash: k.SecretHash, At: at(0).Add(time.Minute)}}
	}
	rejected := func(t *testing.T, s store.Store, su setup, check *store.KeyCheck, what string) {
		t.Helper()
		w := store.Write{OrgID: su.org, ReceivedAt: at(1), Check: check,
			Calls: []store.CallWrite{cw("sip", "guarded-"+what, store.StateRinging, ev("call_received", 0, at(1)))}}
		if _, err := s.WriteCalls(t.Context(), w); !errors.Is(err, store.ErrKeyRejected) {
			t.Errorf("%s: WriteCalls err = %v, want ErrKeyRejected", what, err)
		}
		wantNoCall(t, s, su.org, "sip", "guarded-"+what)

		// A call already on file is not touched, nor is a second call of the same Write: the
		// guard comes before anything is written, whatever the order of the calls.
		existing := "existing-" + what
		write(t, s, store.Write{OrgID: su.org, ReceivedAt: at(1),
			Calls: []store.CallWrite{cw("sip", existing, store.StateRinging, ev("call_received", 0, at(1)))}})
		w = store.Write{OrgID: su.org, ReceivedAt: at(2), Check: check, Calls: []store.CallWrite{
			cw("sip", "zz-guarded-"+what, store.StateEnded, ev("call_ended", 2, at(2))),
			cw("sip", existing, store.StateEnded, ev("call_ended", 2, at(2))),
		}}
		if _, err := s.WriteCalls(t.Context(), w); !errors.Is(err, store.ErrKeyRejected) {
			t.Errorf("%s: WriteCalls of two calls err = %v, want ErrKeyRejected", what, err)
		}
		wantNoCall(t, s, su.org, "sip", "zz-guarded-"+what)
		if c, evs := getCall(t, s, su.org, "sip", existing); c.State != store.StateRinging || len(evs) != 1 {
			t.Errorf("%s: the call on file changed under a rejected key: state %v, %d events", what, c.State, len(evs))
		}

		// A ring sent again for a call on file, with what followed it: the guard holds though no
		// call is new.
		w = store.Write{OrgID: su.org, ReceivedAt: at(2), Check: check, Calls: []store.CallWrite{
			cw("sip", existing, store.StateAnswered, ev("call_received", 0, at(1)), ev("call_answered", 1, at(2))),
		}}
		if _, err := s.WriteCalls(t.Context(), w); !errors.Is(err, store.ErrKeyRejected) {
			t.Errorf("%s: WriteCalls of a ring on file err = %v, want ErrKeyRejected", what, err)
		}
		if c, evs := getCall(t, s, su.org, "sip", existing); c.State != store.StateRinging || len(evs) != 1 {
			t.Errorf("%s: a ring on file changed its call under a rejected key: state %v, %d events", what, c.State, len(evs))
		}

		// More calls than a store may write in one statement: the guard covers them all.
		w = store.Write{OrgID: su.org, ReceivedAt: at(2), Check: check, Calls: manyCalls("many-"+what, 70)}
		if _, err := s.WriteCalls(t.Context(), w); !errors.Is(err, store.ErrKeyRejected) {
			t.Errorf("%s: WriteCalls of %d calls err = %v, want ErrKeyRejected", what, len(w.Calls), err)
		}
		wantNoCall(t, s, su.org, "sip", "many-"+what+"-69")

		// One ref, several (a batch of rings), one of them on file, and more than a store may
		// ask in one statement.
		refs := []store.EventRef{{Provider: "sip", ProviderCallID: "x", DedupeKey: "call_received:0"},
			{Provider: "sip", ProviderCallID: existing, DedupeKey: "call_received:0"}}
		for _, refs := range [][]store.EventRef{refs[:1], refs, slices.Repeat(refs, 35)} {
			if _, err := s.KnownEvents(t.Context(), su.org, refs, check); !errors.Is(err, store.ErrKeyRejected) {
				t.Errorf("%s: KnownEvents of %d refs err = %v, want ErrKeyRejected", what, len(refs), err)
			}
			if _, err := s.Ringing(t.Context(), su.org, refs, check); !errors.Is(err, store.ErrKeyRejected) {
				t.Errorf("%s: Ringing of %d refs err = %v, want ErrKeyRejected", what, len(refs), err)
			}
		}
	}
	return []contractTest{
		{"LiveKeyPasses", func(t *testing.T, s store.Store) {
			su := prepare(t, s)
			w := store.Write{OrgID: su.org, ReceivedAt: at(1), Check: su.check,
				Calls: []store.CallWrite{cw("sip", "guarded", store.StateRinging, ev("call_received", 0, at(1)))}}
			write(t, s, w)
			got, err := s.KnownEvents(t.Context(), su.org, []store.EventRef{{Provider: "sip", ProviderCallID: "guarded", DedupeKey: "call_received:0"}}, su.check)
			if err != nil || len(got) != 1 || !got[0] {
				t.Errorf("KnownEvents = %v, %v", got, err)
			}
			if got, err := s.KnownEvents(t.Context(), su.org, nil, su.check); err != nil || len(got) != 0 {
				t.Errorf("KnownEvents with no refs = %v, %v", got, err)
			}
			// More calls and refs than a store may write or ask in one statement.
			calls := manyCalls("many", 70)
			write(t, s, store.Write{OrgID: su.org, ReceivedAt: at(1), Check: su.check, Calls: calls})
			refs := make([]store.EventRef, len(calls)+1)
			for i, c := range calls {
				refs[i] = store.EventRef{Provider: c.Provider, ProviderCallID: c.ProviderCallID, DedupeKey: "call_received:0"}
			}
			refs[len(calls)] = store.EventRef{Provider: "sip", ProviderCallID: "not-on-file", DedupeKey: "call_received:0"}
			// The same rings sent again under the key: all on file, none created again.
			for i, r := range write(t, s, store.Write{OrgID: su.org, ReceivedAt: at(2), Check: su.check, Calls: manyCalls("many", 70)}) {
				if r.Created || !r.Events[0].Duplicate || r.Events[0].ID != calls[i].Events[0].ID {
					t.Errorf("ring %d sent again = (Created %v, %+v), want on file with event %s", i, r.Created, r.Events[0], calls[i].Events[0].ID)
				}
			}
			rs, err := s.Ringing(t.Context(), su.org, refs, su.check)
			if err != nil || len(rs) != len(refs) {
				t.Fatalf("Ringing of %d refs = %d entries, %v", len(refs), len(rs), err)
			}
			for i, r := range rs {
				want := store.Ringing{Known: true, State: store.StateRinging}
				if i == len(calls) {
					want = store.Ringing{}
				}
				if r != want {
					t.Errorf("Ringing[%d] = %+v, want %+v", i, r, want)
				}
			}
		}},
		{"WrongSecretRejected", func(t *testing.T, s store.Store) {
			su := prepare(t, s)
			c := *su.check
			c.SecretHash = hash("another secret")
			rejected(t, s, su, &c, "wrong")
		}},
		{"UnknownClientRejected", func(t *testing.T, s store.Store) {
			su := prepare(t, s)
			c := *su.check
			c.ClientID = "cw_ci_nobody"
			rejected(t, s, su, &c, "unknown")
		}},
		{"ExpiredRejected", func(t *testing.T, s store.Store) {
			su := prepare(t, s)
			c := *su.check
			c.At = *su.key.ExpiresAt
			rejected(t, s, su, &c, "expired")
		}},
		{"RevokedRejected", func(t *testing.T, s store.Store) {
			su := prepare(t, s)
			if err := s.RevokeKey(t.Context(), su.key.ClientID, at(0)); err != nil {
				t.Fatal(err)
			}
			rejected(t, s, su, su.check, "revoked")
		}},
		{"RotatedSecretRejected", func(t *testing.T, s store.Store) {
			su := prepare(t, s)
			if err := s.RotateKey(t.Context(), su.key.ClientID, hash("rotated"), "rotated8", at(0)); err != nil {
				t.Fatal(err)
			}
			rejected(t, s, su, su.check, "rotated")
			c := *su.check
			c.SecretHash = hash("rotated")
			w := store.Write{OrgID: su.org, ReceivedAt: at(1), Check: &c,
				Calls: []store.CallWrite{cw("sip", "guarded-new", store.StateRinging, ev("call_received", 0, at(1)))}}
			write(t, s, w)
		}},
	}
}

// manyCalls returns n ringing calls of provider sip, named prefix-0 to prefix-(n-1).
func manyCalls(prefix string, n int) []store.CallWrite {
	calls := make([]store.CallWrite, n)
	for i := range calls {
		calls[i] = cw("sip", fmt.Sprintf("%s-%d", prefix, i), store.StateRinging, ev("call_received", 0, at(1)))
	}
	return calls
}

// ringingTests covers Ringing: whether an event is on file, and the state its call reached.
func ringingTests() []contractTest {
	return []contractTest{
		{"RingingReportsEventAndState", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(1), Calls: []store.CallWrite{
				cw("sip", "ended", store.StateEnded, ev("call_ended", 3, at(1))),
				cw("sip", "rang", store.StateRinging, ev("call_received", 0, at(1))),
			}})
			refs := []store.EventRef{
				{Provider: "sip", ProviderCallID: "ended", DedupeKey: "call_received:0"},
				{Provider: "sip", ProviderCallID: "rang", DedupeKey: "call_received:0"},
				{Provider: "sip", ProviderCallID: "new", DedupeKey: "call_received:0"},
			}
			got, err := s.Ringing(t.Context(), org, refs, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := []store.Ringing{{Known: false, State: store.StateEnded}, {Known: true, State: store.StateRinging}, {}}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("Ringing[%d] = %+v, want %+v", i, got[i], want[i])
				}
			}
			if other, err := s.Ringing(t.Context(), newOrg(t, s), refs, nil); err != nil || other[0] != (store.Ringing{}) {
				t.Errorf("another organization sees %+v, %v", other, err)
			}
		}},
		{"RingingManyRefs", func(t *testing.T, s store.Store) {
			// More refs than a store may ask in one statement, every other one's call on file,
			// and the last ref a repeat of the first.
			org := newOrg(t, s)
			var calls []store.CallWrite
			var refs []store.EventRef
			var want []store.Ringing
			for i := range 70 {
				id := fmt.Sprintf("c-%02d", i)
				refs = append(refs, store.EventRef{Provider: "sip", ProviderCallID: id, DedupeKey: "call_received:0"})
				switch i % 3 {
				case 0:
					calls = append(calls, cw("sip", id, store.StateRinging, ev("call_received", 0, at(1))))
					want = append(want, store.Ringing{Known: true, State: store.StateRinging})
				case 1:
					calls = append(calls, cw("sip", id, store.StateAnswered, ev("call_answered", 1, at(1))))
					want = append(want, store.Ringing{State: store.StateAnswered})
				default:
					want = append(want, store.Ringing{})
				}
			}
			refs, want = append(refs, refs[0]), append(want, want[0])
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(1), Calls: calls})
			got, err := s.Ringing(t.Context(), org, refs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("Ringing returned %d entries for %d refs", len(got), len(refs))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("Ringing[%d] (%s) = %+v, want %+v", i, refs[i].ProviderCallID, got[i], want[i])
				}
			}
		}},
	}
}
