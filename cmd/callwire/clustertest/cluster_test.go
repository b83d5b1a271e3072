// Package clustertest runs callwire as a deployment past one machine runs it, and injects faults
// while it works: three `callwire serve` replicas (the real binary, each its own process) on one
// PostgreSQL schema with a streaming standby for the history reads and a six-node Redis
// Cluster, HAProxy in front of them, workstations holding popup streams on every replica, and
// reporters posting calls through HAProxy with the SDK. A serve replica, the Redis master of the
// popups' shard and the standby are killed in turn and started again (the broker's and the
// store's faults come from Broker.Faults and Store.Faults). Afterwards it checks that every
// acknowledged event is stored exactly once and none invented, and that every call that rang
// reached the desks of its locations once, and reports what was lost, retried and slowed in each
// fault window.
//
// It runs only with CALLWIRE_TEST_CLUSTER=1 (`make cluster-test` sets it), and needs HAProxy
// (Debian package haproxy), PostgreSQL with its binaries and replication allowed from
// 127.0.0.1, and redis-server and redis-cli 7 or later (see .ci/services.sh).
package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/internal/haproxy"
)

// EnvRun is the environment variable that, set to "1", runs the topology; without it the test
// skips at once.
const EnvRun = "CALLWIRE_TEST_CLUSTER"

// EnvRequireHAProxy is the environment variable that, set to "1", turns a missing haproxy from a
// skip into a failure.
const EnvRequireHAProxy = "CALLWIRE_REQUIRE_HAPROXY"

// callwireBin is the callwire binary the test built, when EnvRun is set.
var callwireBin string

func TestMain(m *testing.M) {
	if os.Getenv(EnvRun) != "1" {
		os.Exit(m.Run())
	}
	os.Exit(e2etest.Main(m, &callwireBin))
}

// The shape of the run.
const (
	replicaCount = 3
	// reporterCount reporters each post one call at a time; a call rings 1 to 2.5s.
	reporterCount = 12
	// calm is the stretch of load before the first fault and after each.
	calm = 10 * time.Second
	// settle is how long after a request ends its popup may still be on its way: a desk's stream
	// must have been open from the request's start to this long after its end for the desk to
	// owe it.
	settle = time.Second
	// downTime is how long a broken part stays down once the rest has noticed (HAProxy took a
	// replica out, a replica took over from a Redis master).
	downTime = 3 * time.Second
)

// window is a stretch of the run the report gives figures for.
type window struct {
	name        string
	from, until time.Time
	// lossless is the fault's Lossless: an owed popup lost in the window fails the run.
	lossless bool
}

func TestCluster(t *testing.T) {
	if os.Getenv(EnvRun) != "1" {
		t.Skip("clustertest: SKIPPING: the cluster topology runs with " + EnvRun + "=1 (make cluster-test)")
	}
	haproxyBin := haproxy.Path()
	if haproxyBin == "" {
		msg := "clustertest: the topology needs HAProxy (apt-get install -y -q haproxy)"
		if os.Getenv(EnvRequireHAProxy) == "1" {
			t.Fatal(msg + ", and " + EnvRequireHAProxy + "=1")
		}
		t.Skip(msg + "; SKIPPING")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	st, br := startStore(t), startBroker(t)
	base := slices.Concat(st.Env(), br.Env())
	cli(t, ctx, base, "migrate")
	org := strings.TrimSpace(cli(t, ctx, base, "orgs", "create", "--name", "Riverside Clinic Group"))
	var reporterKey, deskKey struct{ ClientID, ClientSecret string }
	mustJSON(t, cli(t, ctx, base, "keys", "create", "--org", org, "--scope", "org.calls.events", "--output", "json"), &reporterKey)
	mustJSON(t, cli(t, ctx, base, "keys", "create", "--org", org, "--scope", "org.popups.read", "--scope", "org.calls.read", "--output", "json"), &deskKey)

	env := slices.Concat(base, []string{
		"CALLWIRE_DATABASE_AUTO_MIGRATE=false",
		// Three replicas share the machine's PostgreSQL with everything else on it.
		"CALLWIRE_DATABASE_MAX_CONNS=6",
		"CALLWIRE_POPUPS_HEARTBEAT=2s",
		"CALLWIRE_LOG_FORMAT=json",
		"CALLWIRE_LOG_LEVEL=warn",
	})
	replicas := make([]*replica, replicaCount)
	for i := range replicas {
		replicas[i] = &replica{name: replicaName(i), addr: freeAddr(t), dir: t.TempDir(), env: env}
		if err := replicas[i].start(t, ctx); err != nil {
			t.Fatal(err)
		}
	}
	lb := startLoadBalancer(t, ctx, haproxyBin, replicas)

	// Two desks per replica: one at the front desk, one in the lab.
	deskCtx, stopDesks := context.WithCancel(ctx)
	defer stopDesks()
	var desks []*desk
	var deskStopped []<-chan struct{}
	for _, r := range replicas {
		for _, loc := range []string{"front-desk", "lab"} {
			d := newDesk(fmt.Sprintf("desk %s@%s", loc, r.name), loc, r.url(), lb.url(), deskKey.ClientID, deskKey.ClientSecret)
			stopped, err := d.run(deskCtx, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			desks = append(desks, d)
			deskStopped = append(deskStopped, stopped)
		}
	}

	faults := slices.Concat([]Fault{killReplica(t, lb, replicas[1])}, br.Faults(org), st.Faults(org))

	rep := newReporters()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadDone := make(chan error, 1)
	go func() {
		loadDone <- rep.run(loadCtx, reporterCount, lb.url(), reporterKey.ClientID, reporterKey.ClientSecret)
	}()

	runStart := time.Now()
	var windows []window
	pause := func() {
		select {
		case <-ctx.Done():
		case err := <-loadDone:
			t.Fatalf("reporters stopped early: %v", err)
		case <-time.After(calm):
		}
	}
	pause()
	for _, f := range faults {
		w := window{name: f.Name, from: time.Now(), lossless: f.Lossless}
		if err := f.Inject(ctx); err != nil {
			t.Fatalf("%s: inject: %v", f.Name, err)
		}
		if err := f.Heal(ctx); err != nil {
			t.Fatalf("%s: heal: %v", f.Name, err)
		}
		w.until = time.Now()
		t.Logf("fault %q: %v from %.1fs into the run", f.Name, w.until.Sub(w.from).Round(10*time.Millisecond), w.from.Sub(runStart).Seconds())
		windows = append(windows, w)
		pause()
	}
	stopLoad()
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	runEnd := time.Now()
	posts := rep.all()

	// The popups of the last calls are still on their way; wait until every desk has what it
	// owes, or a bound.
	owed := owedPopups(posts, desks)
	_ = poll(ctx, 15*time.Second, "the desks to receive the popups they owe", func() (bool, error) {
		for _, o := range owed {
			if o.desk.received(o.call) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	stopDesks()
	for _, s := range deskStopped {
		<-s
	}

	stored := readStored(t, ctx, lb.url(), deskKey.ClientID, deskKey.ClientSecret, posts)
	checkEvents(t, posts, stored)
	popups := checkPopups(t, posts, desks, windows)
	report(t, runEnd.Sub(runStart), posts, windows, popups, desks)
}

// killReplica is the fault that kills r with SIGKILL mid-run, waits until HAProxy has taken it
// out, leaves it down for downTime, then starts it again in place and waits until HAProxy
// sends it requests again.
func killReplica(t *testing.T, lb *loadBalancer, r *replica) Fault {
	return Fault{
		Name: r.name + " killed (SIGKILL) and restarted",
		Inject: func(ctx context.Context) error {
			if err := r.kill(ctx); err != nil {
				return err
			}
			if err := lb.waitStatus(ctx, r.name, "DOWN"); err != nil {
				return err
			}
			return hold(ctx)
		},
		Heal: func(ctx context.Context) error {
			if err := r.start(t, ctx); err != nil {
				return err
			}
			return lb.waitStatus(ctx, r.name, "UP")
		},
	}
}

// mustJSON decodes s into v, failing t.
func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

// eventKey names one event of the run: its call and its sequence.
type eventKey struct {
	call string
	seq  int
}

// readStored reads every call of the organization and its events through the history API, and
// returns how many times each event is stored. It reads again, within a bound, while an
// acknowledged event is missing: a read that may be served by a standby lags the primary.
func readStored(t *testing.T, ctx context.Context, base, clientID, secret string, posts []post) map[eventKey]int {
	t.Helper()
	get := func(path string, v any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Client-ID", clientID)
		req.Header.Set("Client-Secret", secret)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	read := func() (map[eventKey]int, error) {
		var ids []string
		cursor := ""
		for {
			var page struct {
				Items []struct {
					ID string `json:"id"`
				} `json:"items"`
				Next *string `json:"next"`
			}
			path := "/api/v1/calls?limit=500"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			if err := get(path, &page); err != nil {
				return nil, err
			}
			for _, it := range page.Items {
				ids = append(ids, it.ID)
			}
			if page.Next == nil || *page.Next == "" {
				break
			}
			cursor = *page.Next
		}
		out := map[eventKey]int{}
		var mu sync.Mutex
		var firstErr error
		var wg sync.WaitGroup
		work := make(chan string)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range work {
					var call struct {
						ProviderCallID string `json:"providerCallId"`
						Events         []struct {
							ProviderCallID string `json:"providerCallId"`
							Sequence       int    `json:"sequence"`
						} `json:"events"`
					}
					err := get("/api/v1/calls/"+url.PathEscape(id), &call)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					for _, e := range call.Events {
						out[eventKey{call: e.ProviderCallID, seq: e.Sequence}]++
					}
					mu.Unlock()
				}
			}()
		}
		for _, id := range ids {
			work <- id
		}
		close(work)
		wg.Wait()
		return out, firstErr
	}
	var stored map[eventKey]int
	err := poll(ctx, 30*time.Second, "the history to hold every acknowledged event", func() (bool, error) {
		s, err := read()
		if err != nil {
			t.Logf("reading the history: %v; reading again", err)
			return false, nil
		}
		stored = s
		for _, p := range posts {
			if p.err != nil {
				continue
			}
			for _, q := range p.seqs {
				if s[eventKey{p.call, q}] == 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil && stored == nil {
		t.Fatal(err)
	}
	return stored
}

// verdict is where the checks report: a *testing.T, or a recorder in the checks' own tests.
type verdict interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// checkEvents fails t unless every acknowledged event is stored exactly once, every stored event
// was sent, and no event is stored twice.
func checkEvents(t verdict, posts []post, stored map[eventKey]int) {
	t.Helper()
	sent := map[eventKey]bool{}
	acked := 0
	var missing, twice, invented []string
	for _, p := range posts {
		for _, q := range p.seqs {
			k := eventKey{p.call, q}
			sent[k] = true
			if p.err == nil {
				acked++
				if stored[k] == 0 {
					missing = append(missing, fmt.Sprintf("%s#%d", k.call, k.seq))
				}
			}
		}
	}
	for k, n := range stored {
		if !sent[k] {
			invented = append(invented, fmt.Sprintf("%s#%d", k.call, k.seq))
		}
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s#%d ×%d", k.call, k.seq, n))
		}
	}
	t.Logf("events: %d sent, %d acknowledged, %d stored", len(sent), acked, len(stored))
	if len(missing) > 0 {
		t.Errorf("%d acknowledged events are not stored: %s", len(missing), firstFew(missing))
	}
	if len(twice) > 0 {
		t.Errorf("%d events are stored more than once: %s", len(twice), firstFew(twice))
	}
	if len(invented) > 0 {
		t.Errorf("%d stored events were never sent: %s", len(invented), firstFew(invented))
	}
}

// owed is a popup a desk must have received: the call rang one of its locations while its
// stream was open, or it was still ringing when a stream of the desk opened and replayed it.
type owed struct {
	desk   *desk
	call   string
	post   post
	replay bool // owed by a stream's replay, not by a live stream
}

// owedPopups returns the popups the desks owe: for each acknowledged call_received, each desk of
// one of its locations whose stream was open from the request's start to settle after its end,
// or whose stream opened after the ringing was on file and before the call was answered (see
// desk.replayedTo).
func owedPopups(posts []post, desks []*desk) []owed {
	answered := map[string]time.Time{}
	for _, p := range posts {
		if p.seqs[0] == 2 {
			answered[p.call] = p.start
		}
	}
	// A call the run never answered rang until the run ended.
	never := time.Now().Add(time.Hour)
	var out []owed
	for _, p := range posts {
		if !p.rings || p.err != nil {
			continue
		}
		until, ok := answered[p.call]
		if !ok {
			until = never
		}
		for _, d := range desks {
			if !slices.Contains(p.locations, d.location) {
				continue
			}
			if d.covered(p.start, p.end.Add(settle)) {
				out = append(out, owed{desk: d, call: p.call, post: p})
			} else if d.replayedTo(p.end, until) {
				out = append(out, owed{desk: d, call: p.call, post: p, replay: true})
			}
		}
	}
	return out
}

// popupFigures are what the desks received, per window.
type popupFigures struct {
	owed    map[string]int // window -> popups owed
	replay  map[string]int // window -> of those, owed by a stream's replay
	lost    map[string]int // window -> owed popups not received
	unowed  map[string]int // window -> rings a desk had no open stream for, and did not get
	twice   int            // popups that came twice on one stream
	repeats int            // popups a desk had shown on an earlier stream, dropped by id
}

// windowOf names the first window a request overlaps, "outside faults" when none: a request
// under way when a fault began (whose retries the fault caused) counts in the fault's window.
// For a popup, the request's end is taken settle later, while its popup may still travel.
func windowOf(p post, popup bool, windows []window) string {
	end := p.end
	if popup {
		end = end.Add(settle)
	}
	for _, w := range windows {
		if p.start.Before(w.until) && !end.Before(w.from) {
			return w.name
		}
	}
	return outside
}

// outside names the run's calm stretches in the report.
const outside = "outside faults"

// checkPopups fails t when a popup came twice on one stream, or a desk lost one it was owed
// outside the fault windows or inside a lossless one; popups lost inside another window are
// reported, not failed: pub/sub delivers at most once, and a desk whose replica died has no
// stream until it reconnects. A
// popup that a new stream replays after an earlier one showed it is a repeat the desk drops by
// id, counted apart.
func checkPopups(t verdict, posts []post, desks []*desk, windows []window) popupFigures {
	t.Helper()
	f := popupFigures{owed: map[string]int{}, replay: map[string]int{}, lost: map[string]int{}, unowed: map[string]int{}}
	owedSet := map[*desk]map[string]bool{}
	lossless := map[string]bool{outside: true}
	for _, w := range windows {
		lossless[w.name] = lossless[w.name] || w.lossless
	}
	for _, o := range owedPopups(posts, desks) {
		w := windowOf(o.post, true, windows)
		f.owed[w]++
		if o.replay {
			f.replay[w]++
		}
		if owedSet[o.desk] == nil {
			owedSet[o.desk] = map[string]bool{}
		}
		owedSet[o.desk][o.call] = true
		if o.desk.received(o.call) == 0 {
			f.lost[w]++
			if lossless[w] {
				how := "live"
				if o.replay {
					how = "from the replay of its next stream"
				}
				where := "outside any fault"
				if w != outside {
					where = "in the window " + w + ", which must lose none"
				}
				t.Errorf("%s lost the popup of %s (owed %s), posted %s to %s %s", o.desk.name, o.call, how,
					o.post.start.Format("15:04:05.000"), o.post.end.Format("15:04:05.000"), where)
			}
		}
	}
	for _, d := range desks {
		for _, c := range d.repeated() {
			f.twice++
			t.Errorf("%s received the popup of %s twice on one stream", d.name, c)
		}
		f.repeats += d.repeats()
	}
	for _, p := range posts {
		if !p.rings || p.err != nil {
			continue
		}
		for _, d := range desks {
			if slices.Contains(p.locations, d.location) && !owedSet[d][p.call] && d.received(p.call) == 0 {
				f.unowed[windowOf(p, true, windows)]++
			}
		}
	}
	return f
}

// report logs the run's figures: requests, retries, p99 of the POSTs, and popups owed and lost,
// for each fault window and outside them.
func report(t *testing.T, run time.Duration, posts []post, windows []window, f popupFigures, desks []*desk) {
	names := []string{outside}
	for _, w := range windows {
		names = append(names, w.name)
	}
	type fig struct {
		posts, failed, retries int
		lat                    []time.Duration
		span                   time.Duration
	}
	figs := map[string]*fig{}
	for _, n := range names {
		figs[n] = &fig{}
	}
	for _, w := range windows {
		figs[w.name].span = w.until.Sub(w.from)
	}
	figs[outside].span = run
	for _, w := range windows {
		figs[outside].span -= w.until.Sub(w.from)
	}
	// Outside the faults, the POSTs before the first and after it, apart: the first meet cold
	// replicas, the others a replica that has just restarted.
	var before, after []time.Duration
	for _, p := range posts {
		name := windowOf(p, false, windows)
		if name == outside && len(windows) > 0 {
			if p.start.Before(windows[0].from) {
				before = append(before, p.end.Sub(p.start))
			} else {
				after = append(after, p.end.Sub(p.start))
			}
		}
		g := figs[name]
		g.posts++
		g.retries += max(p.attempts-1, 0)
		if p.err != nil {
			g.failed++
		}
		g.lat = append(g.lat, p.end.Sub(p.start))
	}
	drops := 0
	var gap time.Duration
	for _, d := range desks {
		drops += d.dropCount()
		gap = max(gap, d.longestGap())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster run: %v, %d replicas behind HAProxy, %d reporters, %d desks (%d streams dropped under them, back within %v at most)\n",
		run.Round(100*time.Millisecond), replicaCount, reporterCount, len(desks), drops, gap.Round(time.Millisecond))
	fmt.Fprintf(&b, "%-52s %7s %6s %7s %8s %8s %11s %10s %12s\n", "window", "length", "POSTs", "failed", "retries", "p99",
		"popups owed", "by replay", "lost (owed)")
	for _, n := range names {
		g := figs[n]
		fmt.Fprintf(&b, "%-52s %7s %6d %7d %8d %8s %11d %10d %12d\n", n, g.span.Round(100*time.Millisecond), g.posts, g.failed,
			g.retries, p99(g.lat).Round(time.Millisecond), f.owed[n], f.replay[n], f.lost[n])
	}
	if len(windows) > 0 {
		fmt.Fprintf(&b, "outside faults, p99 of the POSTs before the first fault: %v (%d POSTs), after it: %v (%d POSTs)\n",
			p99(before).Round(time.Millisecond), len(before), p99(after).Round(time.Millisecond), len(after))
	}
	for _, n := range names {
		if f.unowed[n] > 0 {
			fmt.Fprintf(&b, "rings a desk had no open stream for (not delivered, not owed), %s: %d\n", n, f.unowed[n])
		}
	}
	fmt.Fprintf(&b, "popups received twice on one stream: %d; replayed popups a desk had shown already (dropped by id): %d", f.twice, f.repeats)
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&b, "\nmachine load average (1, 5, 15 min) at the end: %s", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	t.Log(b.String())
}

// p99 returns the 99th percentile of ds, 0 for none.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*99+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}

// firstFew joins the first ten of s.
func firstFew(s []string) string {
	sort.Strings(s)
	if len(s) > 10 {
		return strings.Join(s[:10], ", ") + ", ..."
	}
	return strings.Join(s, ", ")
}
