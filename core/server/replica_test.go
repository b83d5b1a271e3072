package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
	"github.com/callwire/callwire/internal/testwait"
)

// TestReadReplica serves with database.read_url naming a real standby: /readyz names the
// replica and its lag is measured; with the standby killed, the history is still answered (by the primary), the
// fallback is counted and /readyz stays 200 with the replica degraded; once it is back, /readyz
// says so.
func TestReadReplica(t *testing.T) {
	standby := pgtest.StartStandby(t)
	db := config.Defaults().Database
	db.URL = pgtest.URL(t)
	db.ReadURL = standby.URL(t, db.URL)
	e := start(t, db)
	reader, secret := e.newKey(e.org, nil, auth.ScopeCallsRead)
	ready := func(want string) {
		t.Helper()
		r := e.do("GET", "/readyz", "")
		if r.status != 200 || !strings.Contains(string(r.raw), `"replica":"`+want+`"`) {
			t.Fatalf("/readyz %d %s, want 200 with the replica %s", r.status, r.raw, want)
		}
	}
	ready("ok")
	if r := e.post(ev("call_received", "replica-1", 0, "")); r.status != 201 {
		t.Fatalf("post: %d %s", r.status, r.raw)
	}
	// The lag is measured (database.read_max_lag's default): the gauge leaves -1, and a standby
	// that keeps up stays under a second behind.
	if m := e.do("GET", "/metrics", ""); !strings.Contains(string(m.raw), "\ncallwire_store_replica_lag_seconds ") {
		t.Fatal("/metrics has no callwire_store_replica_lag_seconds")
	}
	testwait.Until(t, 10*time.Second, "callwire_store_replica_lag_seconds from 0 to 1 with the standby keeping up", func() bool {
		lag := e.metric("callwire_store_replica_lag_seconds")
		return lag >= 0 && lag <= 1
	})

	if err := standby.Kill(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/api/v1/calls", "", "Client-ID", reader, "Client-Secret", secret)
	if r.status != 200 || !strings.Contains(string(r.raw), "replica-1") {
		t.Fatalf("history with the standby down: %d %s, want the call, read on the primary", r.status, r.raw)
	}
	if n := e.metric("callwire_store_replica_fallbacks_total"); n < 1 {
		t.Errorf("callwire_store_replica_fallbacks_total %v after a read the primary served, want at least 1", n)
	}
	ready("degraded")

	if err := standby.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testwait.NoError(t, 20*time.Second, func() error {
		r := e.do("GET", "/readyz", "")
		if r.status == 200 && strings.Contains(string(r.raw), `"replica":"ok"`) {
			return nil
		}
		return fmt.Errorf("/readyz %d %s after the standby restarted, want the replica ok", r.status, r.raw)
	})
}
