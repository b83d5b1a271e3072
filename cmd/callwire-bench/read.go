package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nyaruka/phonenumbers"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/store"
)

// The read bench (-read): the history's requests timed over HTTP against the real server, on a
// store of a clinic group's year (see readfill.go), with a key of org.calls.read for each
// organization. First it walks each organization's history, unmeasured, to gather what the
// measured requests ask for: cursors of the list several pages deep (and, for the ten largest
// organizations, thousands of calls deep), with and without filters, its callers' numbers, call
// ids and the to-call-back list's cursors. Then each kind of request runs -read-requests times
// with one client and again with -read-concurrency clients, after an unmeasured warm-up; each
// request is for an organization drawn by its share of the calls, so the large organizations,
// whose reads cost most, are read most. Latency is from sending the request to reading the last
// byte of the answer, which must be 200.

// readKind is one kind of request the read bench times.
type readKind struct {
	name  string
	bound time.Duration // the bound on its p99
	what  string
}

// readKinds are the kinds, in the order they run and are reported.
var readKinds = []readKind{
	{"calls-first", 20 * time.Millisecond, "GET /api/v1/calls: the first page (50 calls)"},
	{"calls-later", 20 * time.Millisecond, "a later page: a cursor 1 to 9 pages deep, or (ten largest organizations) up to 10,000 calls deep"},
	{"filtered-first", 20 * time.Millisecond, "the first page with a filter: inbound missed, voicemail, recorded, outbound, an extension, a location or one day"},
	{"filtered-later", 20 * time.Millisecond, "a later page (1 to 3 deep) of those filters"},
	{"number-e164", 50 * time.Millisecond, "number=<E.164> of a caller of the organization"},
	{"number-national", 50 * time.Millisecond, "number=<national form> read with the organization's country (the six of seven organizations that have one)"},
	{"number-trailing", 50 * time.Millisecond, "number=<4 to 6 trailing digits> of a caller"},
	{"callbacks-first", 10 * time.Millisecond, "GET /api/v1/callbacks: the first page of open items, or of closed ones (one in four)"},
	{"callbacks-later", 10 * time.Millisecond, "a later page of open items, 1 to 5 deep"},
	{"call", 10 * time.Millisecond, "GET /api/v1/calls/{id}: a call with its timeline"},
}

// readTarget is what the measured requests ask, by kind and organization.
type readTarget struct {
	orgs  []readTargetOrg
	paths map[string][][]string // kind → organization index → request paths
	// callbacks is false when the store answers /api/v1/callbacks with 501.
	callbacks bool
}

type readTargetOrg struct {
	id    string
	share float64
	cred  auth.Credential
}

// readResult is one kind at one concurrency.
type readResult struct {
	Kind     string  `json:"kind"`
	Clients  int     `json:"clients"`
	Requests int     `json:"requests"`
	P50ms    float64 `json:"p50Ms"`
	P99ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
	BoundMs  float64 `json:"boundMs"`
	Met      *bool   `json:"met"` // nil: not available
	Note     string  `json:"note,omitempty"`
	// Load is the machine's load average over the last minute when the pass ended (-1 where
	// the system does not tell): above the CPUs' number, requests waited for a CPU.
	Load float64 `json:"load"`
	// Slowest are the three slowest requests: latency, organization and path.
	Slowest []string `json:"slowest,omitempty"`
}

// readReport is the read bench's outcome on one store.
type readReport struct {
	Store   string       `json:"store"`
	Where   string       `json:"where"`
	Machine machine      `json:"machine"`
	Fill    readFillInfo `json:"fill"`
	Reused  bool         `json:"reused"`
	Results []readResult `json:"results"`
	// AllMet is true when every kind measured met its bound (a kind not available is not
	// counted).
	AllMet    bool    `json:"allMet"`
	PrimeSecs float64 `json:"primeSeconds"`
}

// runRead is the read bench on each store of o.stores in turn.
func runRead(ctx context.Context, o options, stdout, stderr io.Writer) error {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	tmp, err := os.MkdirTemp("", "callwire-bench-read-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	argv := []string{o.serverBin, "serve"}
	if o.serverBin == "" {
		logf("building cmd/callwire")
		bin, err := buildServer(ctx, tmp)
		if err != nil {
			return err
		}
		argv[0] = bin
	}
	var reports []readReport
	for _, kind := range o.stores {
		n := o.readSQLiteEvents
		if kind == storePostgres {
			n = o.readPGEvents
		}
		rep, err := readStoreBench(ctx, o, kind, n, argv, tmp, logf)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		reports = append(reports, rep)
		if !o.jsonOut {
			printReadReport(stdout, rep)
		}
	}
	if o.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	return nil
}

// readStoreBench opens (and if need be fills) the store of kind with events events, starts the
// server on it and times the reads.
func readStoreBench(ctx context.Context, o options, kind string, events int64, argv []string, dir string, logf func(string, ...any)) (rep readReport, err error) {
	rs, err := openReadStore(ctx, o, kind, events, logf)
	if err != nil {
		return rep, err
	}
	closeStore := rs.close
	defer func() {
		if closeStore != nil {
			err = errors.Join(err, closeStore())
		}
	}()
	rep = readReport{Store: kind, Where: rs.where, Fill: rs.fill, Reused: rs.reused,
		Machine: machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Memory: memTotal(),
			GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version()}}

	t := &readTarget{paths: map[string][][]string{}}
	now := time.Now().UTC()
	for k, share := range readShares() {
		cred := auth.NewCredential()
		key := store.Key{ClientID: cred.ClientID, OrgID: readOrgID(k), Scopes: []string{auth.ScopeCallsRead},
			SecretHash: cred.SecretHash, SecretLast8: cred.SecretLast8, CreatedAt: now}
		if err := rs.st.CreateKey(ctx, key); err != nil {
			return rep, fmt.Errorf("create key: %w", err)
		}
		t.orgs = append(t.orgs, readTargetOrg{id: readOrgID(k), share: share, cred: cred})
	}
	// The server alone reads the store from here on.
	err = rs.close()
	closeStore = nil
	if err != nil {
		return rep, err
	}

	co := rs.co
	co.argv, co.maxConns, co.dir = argv, o.maxConns, dir
	srv, err := startServer(ctx, co)
	if err != nil {
		return rep, err
	}
	defer func() {
		if serr := srv.stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop server: %w", serr))
		}
	}()
	logf("%s: server ready on %s", kind, srv.addr)
	transport := &http.Transport{Proxy: nil, MaxIdleConns: 2 * o.readConcurrency, MaxIdleConnsPerHost: 2 * o.readConcurrency,
		IdleConnTimeout: 2 * time.Minute, DisableCompression: true}
	defer transport.CloseIdleConnections()
	c := &readClient{http: &http.Client{Transport: transport, Timeout: 60 * time.Second}, base: "http://" + srv.addr}

	start := time.Now()
	if err := primeRead(ctx, c, t, logf); err != nil {
		return rep, err
	}
	rep.PrimeSecs = time.Since(start).Seconds()
	logf("%s: walked the organizations' histories in %v", kind, time.Since(start).Round(time.Second))

	rep.AllMet = true
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range readKinds {
		if len(o.readKinds) > 0 && !slices.Contains(o.readKinds, k.name) {
			continue
		}
		for _, clients := range []int{1, o.readConcurrency} {
			res := readResult{Kind: k.name, Clients: clients, BoundMs: ms(k.bound)}
			if strings.HasPrefix(k.name, "callbacks") && !t.callbacks {
				res.Note = "not available: the store answers 501"
				rep.Results = append(rep.Results, res)
				continue
			}
			if !slices.ContainsFunc(t.paths[k.name], func(p []string) bool { return len(p) > 0 }) {
				res.Note = "no organization has such a request (a store too small)"
				rep.Results = append(rep.Results, res)
				rep.AllMet = false
				continue
			}
			warm := max(clients, o.readRequests/10)
			if _, _, err := c.measure(ctx, t, k.name, clients, warm, r); err != nil {
				return rep, fmt.Errorf("%s warm-up: %w", k.name, err)
			}
			lat, slow, err := c.measure(ctx, t, k.name, clients, o.readRequests, r)
			if err != nil {
				return rep, fmt.Errorf("%s: %w", k.name, err)
			}
			res.Slowest, res.Load = slow, loadAvg()
			slices.Sort(lat)
			res.Requests = len(lat)
			res.P50ms, res.P99ms, res.MaxMs = ms(percentile(lat, 50)), ms(percentile(lat, 99)), ms(lat[len(lat)-1])
			met := res.P99ms <= res.BoundMs
			res.Met = &met
			rep.AllMet = rep.AllMet && met
			rep.Results = append(rep.Results, res)
			logf("%s: %s, %d client(s): p50 %.2f ms, p99 %.2f ms, max %.2f ms (bound %.0f ms); slowest: %s", kind, k.name, clients,
				res.P50ms, res.P99ms, res.MaxMs, res.BoundMs, strings.Join(slow, "; "))
		}
	}
	return rep, nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// readClient sends the read bench's requests.
type readClient struct {
	http *http.Client
	base string
}

// get sends GET path with org's key and returns the status and the body.
func (c *readClient) get(ctx context.Context, org readTargetOrg, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Client-ID", org.cred.ClientID)
	req.Header.Set("Client-Secret", org.cred.Secret)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// page is a page of the list or of the to-call-back list, as much of it as the bench reads.
type page struct {
	Items []struct {
		ID         string           `json:"id"`
		Direction  string           `json:"direction"`
		From       *json.RawMessage `json:"from"`
		To         *json.RawMessage `json:"to"`
		AnsweredBy *string          `json:"answeredBy"`
		Number     string           `json:"number"`
	} `json:"items"`
	Next *string `json:"next"`
}

// party is what the bench reads of a call's party.
type party struct {
	Number    string `json:"number"`
	Extension string `json:"extension"`
}

// getPage gets path (which must answer 200) as a page.
func (c *readClient) getPage(ctx context.Context, org readTargetOrg, path string) (page, error) {
	var p page
	status, body, err := c.get(ctx, org, path)
	if err != nil {
		return p, err
	}
	if status != http.StatusOK {
		return p, fmt.Errorf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return p, fmt.Errorf("GET %s: %w", path, err)
	}
	return p, nil
}

// withCursor returns path with its cursor parameter set to cursor.
func withCursor(path, cursor string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "cursor=" + url.QueryEscape(cursor)
}

// primeRead walks each organization's history and fills t.paths.
func primeRead(ctx context.Context, c *readClient, t *readTarget, logf func(string, ...any)) error {
	status, body, err := c.get(ctx, t.orgs[0], "/api/v1/callbacks")
	switch {
	case err != nil:
		return err
	case status == http.StatusOK:
		t.callbacks = true
	case status == http.StatusNotImplemented:
		logf("/api/v1/callbacks answers 501 on this store: its requests are not available")
	default:
		return fmt.Errorf("GET /api/v1/callbacks: %d %s", status, body)
	}
	for _, k := range readKinds {
		t.paths[k.name] = make([][]string, len(t.orgs))
	}
	add := func(kind string, oi int, path string) { t.paths[kind][oi] = append(t.paths[kind][oi], path) }
	r := rand.New(rand.NewPCG(3, 4))
	for oi, org := range t.orgs {
		region := readRegions[oi%len(readRegions)]
		loc, err := region.Location()
		if err != nil {
			return err
		}
		// The list, nine pages deep; its items give the numbers, extensions and ids.
		add("calls-first", oi, "/api/v1/calls")
		var numbers, exts []string
		seen := map[string]bool{}
		path := "/api/v1/calls"
		for depth := 0; depth < 10; depth++ {
			p, err := c.getPage(ctx, org, path)
			if err != nil {
				return err
			}
			for _, it := range p.Items {
				add("call", oi, "/api/v1/calls/"+url.PathEscape(it.ID))
				var other *json.RawMessage
				switch it.Direction {
				case "inbound":
					other = it.From
				case "outbound":
					other = it.To
				}
				var pt party
				if other != nil && json.Unmarshal(*other, &pt) == nil && strings.HasPrefix(pt.Number, "+") && !seen[pt.Number] {
					seen[pt.Number] = true
					numbers = append(numbers, pt.Number)
				}
				if it.AnsweredBy != nil && !slices.Contains(exts, *it.AnsweredBy) {
					exts = append(exts, *it.AnsweredBy)
				}
			}
			if p.Next == nil {
				break
			}
			path = withCursor("/api/v1/calls", *p.Next)
			if depth < 9 {
				add("calls-later", oi, path)
			}
		}
		// Deep in the history of the largest organizations: a cursor every 500 calls.
		if oi < 10 {
			path := "/api/v1/calls?limit=500"
			for range 20 {
				p, err := c.getPage(ctx, org, path)
				if err != nil {
					return err
				}
				if p.Next == nil {
					break
				}
				add("calls-later", oi, withCursor("/api/v1/calls", *p.Next))
				path = withCursor("/api/v1/calls?limit=500", *p.Next)
			}
		}
		// Filters, each three pages deep.
		day := time.Now().In(loc).AddDate(0, 0, -30-r.IntN(300)).Format(time.DateOnly)
		filters := []string{"direction=inbound&outcome=missed", "outcome=voicemail", "recorded=true", "direction=outbound",
			"location=front-desk", "from=" + day + "&until=" + day}
		if len(exts) > 0 {
			filters = append(filters, "extension="+url.QueryEscape(exts[r.IntN(len(exts))]))
		}
		for _, f := range filters {
			base := "/api/v1/calls?" + f
			add("filtered-first", oi, base)
			path := base
			for range 3 {
				p, err := c.getPage(ctx, org, path)
				if err != nil {
					return err
				}
				if p.Next == nil {
					break
				}
				path = withCursor(base, *p.Next)
				add("filtered-later", oi, path)
			}
		}
		// Numbers, in the three forms.
		for _, n := range numbers {
			add("number-e164", oi, "/api/v1/calls?number="+url.QueryEscape(n))
			digits := store.NumberKey(n) // reversed
			tail := []byte(digits[:min(len(digits), 4+r.IntN(3))])
			slices.Reverse(tail)
			add("number-trailing", oi, "/api/v1/calls?number="+string(tail))
			if region.Country != "" {
				if pn, err := phonenumbers.Parse(n, region.Country); err == nil {
					add("number-national", oi, "/api/v1/calls?number="+url.QueryEscape(phonenumbers.Format(pn, phonenumbers.NATIONAL)))
				}
			}
		}
		if t.callbacks {
			add("callbacks-first", oi, "/api/v1/callbacks")
			add("callbacks-first", oi, "/api/v1/callbacks")
			add("callbacks-first", oi, "/api/v1/callbacks")
			add("callbacks-first", oi, "/api/v1/callbacks?state=closed")
			path := "/api/v1/callbacks"
			for range 5 {
				p, err := c.getPage(ctx, org, path)
				if err != nil {
					return err
				}
				if p.Next == nil {
					break
				}
				path = withCursor("/api/v1/callbacks", *p.Next)
				add("callbacks-later", oi, path)
			}
		}
	}
	return nil
}

// measure sends n requests of kind from clients concurrent clients, each for an organization
// drawn by its share among those with requests of the kind, and returns their latencies and
// the three slowest requests.
func (c *readClient) measure(ctx context.Context, t *readTarget, kind string, clients, n int, r *rand.Rand) ([]time.Duration, []string, error) {
	byOrg := t.paths[kind]
	var cum []float64
	var idx []int
	var acc float64
	for oi, ps := range byOrg {
		if len(ps) > 0 {
			acc += t.orgs[oi].share
			cum, idx = append(cum, acc), append(idx, oi)
		}
	}
	type job struct {
		org  readTargetOrg
		path string
	}
	jobs := make([]job, n)
	for i := range jobs {
		j, _ := slices.BinarySearch(cum, r.Float64()*acc)
		oi := idx[min(j, len(idx)-1)]
		jobs[i] = job{t.orgs[oi], byOrg[oi][r.IntN(len(byOrg[oi]))]}
	}
	lat := make([]time.Duration, n)
	errs := make([]error, clients)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n || ctx.Err() != nil {
					return
				}
				start := time.Now()
				status, body, err := c.get(ctx, jobs[k].org, jobs[k].path)
				lat[k] = time.Since(start)
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("GET %s: %d %s", jobs[k].path, status, body)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return -cmp.Compare(lat[a], lat[b]) })
	var slow []string
	for _, i := range order[:min(3, n)] {
		slow = append(slow, fmt.Sprintf("%.1f ms %s %s", ms(lat[i]), jobs[i].org.id, jobs[i].path))
	}
	return lat, slow, ctx.Err()
}

// printReadReport prints rep as a table.
func printReadReport(w io.Writer, rep readReport) {
	fmt.Fprintf(w, "\nread bench: %s (%s), %d calls and %d events of %d organizations", rep.Store, rep.Where, rep.Fill.Calls, rep.Fill.Events, readOrgs)
	if rep.Reused {
		fmt.Fprintf(w, ", filled earlier (%s, in %.0f s)\n", rep.Fill.FilledAt, rep.Fill.Seconds)
	} else {
		fmt.Fprintf(w, ", filled now in %.0f s\n", rep.Fill.Seconds)
	}
	fmt.Fprintf(w, "machine: %d CPUs, %s, %s/%s, %s\n\n", rep.Machine.CPUs, rep.Machine.Memory, rep.Machine.GOOS, rep.Machine.GOARCH, rep.Machine.Go)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tclients\trequests\tp50 ms\tp99 ms\tmax ms\tbound ms\tmet\tload\t")
	var notes []string
	for _, r := range rep.Results {
		if r.Met == nil {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t%.0f\tn/a\t-\t\n", r.Kind, r.Clients, r.BoundMs)
			if n := r.Kind + ": " + r.Note; !slices.Contains(notes, n) {
				notes = append(notes, n)
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%.2f\t\n", r.Kind, r.Clients, r.Requests, r.P50ms, r.P99ms, r.MaxMs, r.BoundMs,
			map[bool]string{true: "yes", false: "NO"}[*r.Met], r.Load)
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintln(w)
	for _, k := range readKinds {
		fmt.Fprintf(w, "  %-16s %s\n", k.name, k.what)
	}
	fmt.Fprintf(w, "load: the machine's load average over the last minute when the pass ended (%d CPUs)\n", rep.Machine.CPUs)
	fmt.Fprintf(w, "every bound measured met: %v\n", rep.AllMet)
}
