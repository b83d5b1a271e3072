package main

import (
	"context"
	"database/sql"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/nyaruka/phonenumbers"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

func TestReadSharesSumToOneLargestFirst(t *testing.T) {
	s := readShares()
	if len(s) != readOrgs {
		t.Fatalf("%d shares, want %d", len(s), readOrgs)
	}
	var sum float64
	for k, v := range s {
		sum += v
		if k > 0 && v >= s[k-1] {
			t.Fatalf("share %d (%v) is not below share %d (%v)", k, v, k-1, s[k-1])
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("shares sum to %v", sum)
	}
}

func TestRandomNumberIsValidForItsCountry(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, reg := range readRegions {
		country := reg.Country
		if country == "" {
			country = "GB"
		}
		t.Run(country, func(t *testing.T) {
			for range 50 {
				n := randomNumber(r, country)
				pn, err := phonenumbers.Parse(n, "")
				if err != nil || !phonenumbers.IsValidNumberForRegion(pn, country) {
					t.Fatalf("%s is not a valid number of %s (%v)", n, country, err)
				}
			}
		})
	}
}

// TestReadCallsAreValidReports checks that the fill's calls are reports the endpoint accepts,
// and that their mix is the one documented.
func TestReadCallsAreValidReports(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	orgs := newReadOrgs(r, 10000)
	o := orgs[0]
	counts := map[string]int{}
	const calls = 5000
	for i := range calls {
		evs := o.readCall(r, int64(i), time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
		body := []byte(`{"events":[`)
		for j, e := range evs {
			if j > 0 {
				body = append(body, ',')
			}
			var err error
			if body, err = e.AppendJSON(body); err != nil {
				t.Fatal(err)
			}
		}
		body = append(body, "]}"...)
		if _, _, err := event.ParseBody(body); err != nil {
			t.Fatalf("call %d: %v\n%s", i, err, body)
		}
		dir := string(evs[0].Call.Direction)
		counts[dir]++
		last := evs[len(evs)-1]
		for _, e := range evs {
			if e.Type == event.CallEnded {
				last = e
			}
		}
		if dir == "inbound" {
			counts["inbound-"+string(last.Disposition)]++
		}
	}
	for _, tc := range []struct {
		what      string
		n         int
		of        int
		want, tol float64
	}{
		{"inbound", counts["inbound"], calls, 0.60, 0.03},
		{"outbound", counts["outbound"], calls, 0.30, 0.03},
		{"internal", counts["internal"], calls, 0.10, 0.02},
		{"inbound missed", counts["inbound-no_answer"] + counts["inbound-cancelled"] + counts["inbound-busy"], counts["inbound"], 0.20, 0.03},
		{"inbound voicemail", counts["inbound-voicemail"], counts["inbound"], 0.08, 0.02},
	} {
		if got := float64(tc.n) / float64(tc.of); math.Abs(got-tc.want) > tc.tol {
			t.Errorf("%s: %.3f of calls, want %.2f", tc.what, got, tc.want)
		}
	}
}

// TestReadStoreIsFilledOnceAndReused fills a small embedded store and opens it again: the second
// open reuses the fill. With its fill's row removed, as an interrupted fill leaves it, the third
// open resumes it and writes nothing twice.
func TestReadStoreIsFilledOnceAndReused(t *testing.T) {
	ctx := context.Background()
	o := options{readDir: t.TempDir()}
	logf := func(format string, args ...any) { t.Logf(format, args...) }
	rs, err := openReadStore(ctx, o, storeSQLite, 3000, logf)
	if err != nil {
		t.Fatal(err)
	}
	if rs.reused || rs.fill.Events < 3000 || rs.fill.Calls == 0 {
		t.Fatalf("first open: reused %v, fill %+v", rs.reused, rs.fill)
	}
	org, err := rs.st.GetOrg(ctx, readOrgID(0))
	if err != nil || org.Region != readRegions[0] {
		t.Fatalf("organization 0: %+v, %v", org, err)
	}
	recs, err := rs.st.ListCalls(ctx, readOrgID(0), store.CallFilter{}, nil, 10)
	if err != nil || len(recs) == 0 {
		t.Fatalf("list: %d calls, %v", len(recs), err)
	}
	first := rs.fill
	if err := rs.close(); err != nil {
		t.Fatal(err)
	}
	rs, err = openReadStore(ctx, o, storeSQLite, 3000, logf)
	if err != nil {
		t.Fatal(err)
	}
	if !rs.reused {
		t.Fatal("second open filled the store again")
	}
	if err := rs.close(); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(o.readDir, "readbench-3000.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM readbench_fill"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rs, err = openReadStore(ctx, o, storeSQLite, 3000, logf)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.close()
	if rs.reused || rs.fill.Events != first.Events || rs.fill.Calls != first.Calls {
		t.Fatalf("resumed: reused %v, fill %+v; first %+v", rs.reused, rs.fill, first)
	}
	var calls, events int64
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM call_events)").Scan(&calls, &events); err != nil {
		t.Fatal(err)
	}
	if calls != first.Calls || events != first.Events {
		t.Fatalf("after the resume %d calls and %d events on file, want %d and %d", calls, events, first.Calls, first.Events)
	}
}

func TestPlanReadFill(t *testing.T) {
	for _, tc := range []struct {
		name          string
		filled        bool
		before, after int64
		refill        bool
		want          readFillPlan
	}{
		{"new store", false, 0, 7, false, readAfresh},
		{"finished, same schema", true, 7, 7, false, readReuse},
		{"finished, asked to refill", true, 7, 7, true, readAfresh},
		{"finished, newer schema", true, 7, 8, false, readAfresh},
		{"interrupted, same schema", false, 7, 7, false, readResume},
		{"interrupted, newer schema", false, 7, 8, false, readAfresh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planReadFill(tc.filled, tc.before, tc.after, tc.refill); got != tc.want {
				t.Fatalf("plan %d, want %d", got, tc.want)
			}
		})
	}
}
