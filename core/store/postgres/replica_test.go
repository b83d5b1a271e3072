package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
	"github.com/callwire/callwire/internal/testwait"
)

// pauseReplay pauses the standby's replay through its connection direct and waits until it is
// paused.
func pauseReplay(t *testing.T, direct *pgx.Conn) {
	t.Helper()
	if _, err := direct.Exec(t.Context(), `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	testwait.NoError(t, 10*time.Second, func() error {
		var state string
		if err := direct.QueryRow(t.Context(), `SELECT pg_get_wal_replay_pause_state()`).Scan(&state); err != nil || state != "paused" {
			return fmt.Errorf("replay is %q (%v), not paused", state, err)
		}
		return nil
	})
}

// listed reports whether the organization's history has the call pcid, read through s.
func listed(ctx context.Context, s *postgres.Store, org, pcid string) (bool, error) {
	recs, err := s.ListCalls(ctx, org, store.CallFilter{}, nil, store.MaxListLimit)
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		if r.Call.ProviderCallID == pcid {
			return true, nil
		}
	}
	return false, nil
}

// TestReadReplica runs the store against a real standby of the test database: the reads of
// the replica's list are served there and see the primary's writes once replayed; every other
// method reads and writes the primary (the standby is read-only, so a write sent there would
// fail), and sees a write at once even while the standby replays nothing; a standby that is
// killed leaves its reads to the primary, and serves them again once it is back.
func TestReadReplica(t *testing.T) {
	standby := pgtest.StartStandby(t)
	url := pgtest.URL(t)
	s := openStore(t, url, postgres.Options{ReadURL: standby.URL(t, url), AcquireTimeout: 5 * time.Second})
	ctx := t.Context()
	direct, err := pgx.Connect(ctx, standby.URL(t, url))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.WithoutCancel(ctx))
	var inRecovery bool
	if err := direct.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("the standby is not in recovery (%v): it would take writes", err)
	}

	org := createOrg(t, s)
	if _, err := s.WriteCalls(ctx, sampleWrite(org, 2, "first")); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	testwait.NoError(t, 20*time.Second, func() error {
		ok, err := listed(ctx, s, org, "first")
		if !ok || err != nil {
			return fmt.Errorf("the first call is not listed through the replica yet (error %v)", err)
		}
		return nil
	})

	// With replay paused, what the replica serves stands still: the primary's new writes are
	// missing there, and present at once in every read of the primary.
	pauseReplay(t, direct)
	w := sampleWrite(org, 1, "second")
	if _, err := s.WriteCalls(ctx, w); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	ref := []store.EventRef{{Provider: "sip", ProviderCallID: "second", DedupeKey: w.Calls[0].Events[0].DedupeKey}}
	clientID := "cw_" + newID()
	hash := sha256.Sum256([]byte(clientID))
	rotated := sha256.Sum256([]byte(clientID + "rotated"))
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"CreateOrg", func() error { return s.CreateOrg(ctx, store.Org{ID: newID(), Name: "another", CreatedAt: base}) }},
		{"UpdateOrgLookup", func() error {
			return s.UpdateOrgLookup(ctx, org, store.Lookup{URL: "https://lookup.example/callers"})
		}},
		{"UpdateOrgRegion", func() error { return s.UpdateOrgRegion(ctx, org, store.Region{TimeZone: "Europe/Paris"}) }},
		{"UpdateOrgRetention", func() error { return s.UpdateOrgRetention(ctx, org, 3650) }},
		{"CreateKey", func() error {
			return s.CreateKey(ctx, store.Key{ClientID: clientID, OrgID: org, Scopes: []string{"org.calls.events"},
				SecretHash: hash[:], SecretLast8: "abcdefgh", CreatedAt: base})
		}},
		{"RotateKey", func() error { return s.RotateKey(ctx, clientID, rotated[:], "hgfedcba", base) }},
		{"RevokeKey", func() error { return s.RevokeKey(ctx, clientID, base) }},
		{"SetCallbackNeedsAnswer", func() error { return s.SetCallbackNeedsAnswer(ctx, org, true) }},
		{"DismissCallback", func() error {
			_, err := s.DismissCallback(ctx, org, "+33123456789", base, "201")
			if errors.Is(err, store.ErrNotFound) {
				return nil // no open item: the statement ran, on the primary
			}
			return err
		}},
		{"PurgeCalls", func() error { _, err := s.PurgeCalls(ctx, org, base.Add(-24*time.Hour), 10); return err }},
		{"KnownEvents sees the write", func() error {
			known, err := s.KnownEvents(ctx, org, ref, nil)
			if err == nil && !known[0] {
				err = errors.New("the event just written is not known")
			}
			return err
		}},
		{"Ringing sees the write", func() error {
			r, err := s.Ringing(ctx, org, ref, nil)
			if err == nil && r[0].State == store.StateUnknown {
				err = errors.New("the call just written is not ringing")
			}
			return err
		}},
		{"GetCall sees the write", func() error { _, _, err := s.GetCall(ctx, org, "sip", "second"); return err }},
		{"GetOrg sees the update", func() error {
			o, err := s.GetOrg(ctx, org)
			if err == nil && o.Lookup.URL != "https://lookup.example/callers" {
				err = fmt.Errorf("lookup %+v, want the one just set", o.Lookup)
			}
			return err
		}},
		{"KeyByClientID sees the revocation", func() error {
			k, err := s.KeyByClientID(ctx, clientID)
			if err == nil && k.RevokedAt == nil {
				err = errors.New("the key just revoked is not revoked")
			}
			return err
		}},
		{"Ping", func() error { return s.Ping(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err != nil {
				t.Errorf("with the standby's replay paused: %v", err)
			}
		})
	}
	if ok, err := listed(ctx, s, org, "second"); err != nil || ok {
		t.Fatalf("the second call is listed (%v, error %v) while the standby replays nothing: the list is not read on the replica", ok, err)
	}
	if _, err := direct.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	testwait.NoError(t, 20*time.Second, func() error {
		ok, err := listed(ctx, s, org, "second")
		if !ok || err != nil {
			return fmt.Errorf("the second call is not listed through the replica once replay resumed (error %v)", err)
		}
		return nil
	})
	if n := s.ReplicaFallbacks(); n != 0 {
		t.Errorf("%d reads fell back to the primary while the standby was up", n)
	}

	// A killed standby: its reads go to the primary, which has every call.
	direct.Close(ctx)
	if err := standby.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteCalls(ctx, sampleWrite(org, 1, "third")); err != nil {
		t.Fatalf("WriteCalls with the standby down: %v", err)
	}
	if ok, err := listed(ctx, s, org, "third"); err != nil || !ok {
		t.Fatalf("with the standby down, the third call is listed %v (error %v), want read on the primary", ok, err)
	}
	third, _, err := s.GetCall(ctx, org, "sip", "third")
	if err != nil {
		t.Fatalf("GetCall: %v", err)
	}
	if _, _, err := s.GetCallByID(ctx, org, third.ID); err != nil {
		t.Errorf("GetCallByID with the standby down: %v", err)
	}
	if _, err := s.ListCallbacks(ctx, org, store.CallbackFilter{Open: true}, nil, 10); err != nil {
		t.Errorf("ListCallbacks with the standby down: %v", err)
	}
	if n := s.ReplicaFallbacks(); n < 1 {
		t.Errorf("no read fell back to the primary with the standby down")
	}
	if err := s.PingReplica(ctx); err == nil || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("PingReplica with the standby down: %v, want an error wrapping store.ErrUnavailable", err)
	}

	// Back up: PingReplica sees it, and the reads return to it.
	if err := standby.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.NoError(t, 20*time.Second, func() error {
		if err := s.PingReplica(ctx); err != nil {
			return err
		}
		return nil
	})
	before := s.ReplicaFallbacks()
	testwait.NoError(t, 20*time.Second, func() error {
		ok, err := listed(ctx, s, org, "third")
		if !ok || err != nil {
			return fmt.Errorf("the third call is not listed through the restarted replica (error %v)", err)
		}
		return nil
	})
	if n := s.ReplicaFallbacks(); n != before {
		t.Errorf("%d more reads fell back to the primary once the standby was back", n-before)
	}
}

// TestReadReplicaUnusable opens the store with a read URL no read can use: the replica's reads
// are served by the primary, counted once per retry period, and PingReplica fails.
func TestReadReplicaUnusable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name    string
		readURL func(primary string) string
	}{
		{"nothing listens", func(string) string {
			return "postgres://postgres@" + closed + "/test?sslmode=disable&connect_timeout=2"
		}},
		{"no such database", func(primary string) string {
			u, err := neturl.Parse(primary)
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/callwire_no_such_database"
			return u.String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.URL(t)
			s := openStore(t, url, postgres.Options{ReadURL: tc.readURL(url)})
			org := createOrg(t, s)
			if _, err := s.WriteCalls(t.Context(), sampleWrite(org, 1, "only")); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if ok, err := listed(t.Context(), s, org, "only"); err != nil || !ok {
					t.Fatalf("listed %v (error %v), want the call, read on the primary", ok, err)
				}
			}
			if n := s.ReplicaFallbacks(); n != 1 {
				t.Errorf("%d fallbacks, want 1: the replica is left alone after the first", n)
			}
			if err := s.PingReplica(t.Context()); err == nil {
				t.Error("PingReplica succeeded on a replica no read can use")
			}
		})
	}
}

// TestReadReplicaLag runs the store against a real standby whose replay is paused while the
// primary writes: once the measured lag passes ReadMaxLag the replica's reads go to the primary
// (they see the write the standby lacks) and PingReplica says how far behind it is; once replay
// resumes, the lag falls to zero and the reads return to the replica.
func TestReadReplicaLag(t *testing.T) {
	standby := pgtest.StartStandby(t)
	url := pgtest.URL(t)
	const maxLag = 300 * time.Millisecond
	s := openStore(t, url, postgres.Options{ReadURL: standby.URL(t, url), AcquireTimeout: 5 * time.Second,
		ReadMaxLag: maxLag, LagInterval: 20 * time.Millisecond})
	ctx := t.Context()
	direct, err := pgx.Connect(ctx, standby.URL(t, url))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.WithoutCancel(ctx))

	org := createOrg(t, s)
	if _, err := s.WriteCalls(ctx, sampleWrite(org, 1, "first")); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	testwait.NoError(t, 20*time.Second, func() error {
		lag, ok := s.ReplicaLag()
		if !ok || lag != 0 {
			return fmt.Errorf("lag %v (measured %v), want 0 once the standby has replayed every write", lag, ok)
		}
		if ok, err := listed(ctx, s, org, "first"); !ok || err != nil {
			return fmt.Errorf("the first call is not listed through the replica yet (error %v)", err)
		}
		return nil
	})
	if err := s.PingReplica(ctx); err != nil {
		t.Fatalf("PingReplica with the standby caught up: %v", err)
	}

	pauseReplay(t, direct)
	if _, err := s.WriteCalls(ctx, sampleWrite(org, 1, "second")); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	// Right after the write the lag is under the bound: the replica serves, without the call.
	if lag, _ := s.ReplicaLag(); lag < maxLag/2 {
		if ok, err := listed(ctx, s, org, "second"); err != nil || ok {
			t.Fatalf("listed %v (error %v) at lag %v: the replica, which lacks the call, should serve", ok, err, lag)
		}
	}
	testwait.NoError(t, 10*time.Second, func() error {
		if lag, ok := s.ReplicaLag(); !ok || lag <= maxLag {
			return fmt.Errorf("lag %v (measured %v) with replay paused, want over %v", lag, ok, maxLag)
		}
		return nil
	})
	if ok, err := listed(ctx, s, org, "second"); err != nil || !ok {
		t.Fatalf("with the replica too far behind, the second call is listed %v (error %v), want read on the primary", ok, err)
	}
	if err := s.PingReplica(ctx); err == nil || !strings.Contains(err.Error(), "behind") {
		t.Errorf("PingReplica with the replica too far behind: %v, want an error saying so", err)
	}
	if n := s.ReplicaFallbacks(); n != 0 {
		t.Errorf("%d fallbacks: a lagging replica's reads are not failures", n)
	}

	if _, err := direct.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	testwait.NoError(t, 20*time.Second, func() error {
		if lag, ok := s.ReplicaLag(); !ok || lag != 0 {
			return fmt.Errorf("lag %v once replay resumed, want 0", lag)
		}
		if err := s.PingReplica(ctx); err != nil {
			return err
		}
		return nil
	})
	// Back on the replica: with replay paused again, a new write is missing from the list.
	pauseReplay(t, direct)
	if _, err := s.WriteCalls(ctx, sampleWrite(org, 1, "third")); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	if ok, err := listed(ctx, s, org, "third"); err != nil || ok {
		t.Errorf("listed %v (error %v) right after the write: the reads have not returned to the replica", ok, err)
	}
	if _, err := direct.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
}
