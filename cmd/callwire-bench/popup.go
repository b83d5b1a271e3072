package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/store"
)

// popupReport is the popup latency: from sending the POST of a call_received to the popup's
// arrival at a workstation subscribed to the server's stream.
type popupReport struct {
	Seconds  float64        `json:"seconds"`
	Calls    int64          `json:"calls"`
	Received int            `json:"received"`
	Missing  int            `json:"missing"`
	Latency  latencySummary `json:"latency"`
	Lookups  int64          `json:"lookups"`
	// Rate is the calls started per second, open loop; 0 for a closed loop at full load.
	Rate float64 `json:"rate,omitempty"`
	// HostShare is the share of the machine's CPU time its host took during the run, where the
	// system tells (see hostShare).
	HostShare *float64 `json:"hostShare,omitempty"`
	// Stalls is what a timer probe saw during the run (light load only).
	Stalls *stallReport `json:"stalls,omitempty"`
}

// popupProbe is a workstation: it holds the server's popup stream open and notes when each
// call_received was sent and when its popup arrived.
type popupProbe struct {
	mu   sync.Mutex
	sent map[string]time.Time
	got  map[string]time.Time
	body io.Closer
	done chan error
}

// startPopupProbe subscribes to the stream for the locations and returns once the server says
// the subscription is live.
func startPopupProbe(ctx context.Context, client *http.Client, base, clientID, secret, locations string) (*popupProbe, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/popups/stream?locations="+locations, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Client-ID", clientID)
	req.Header.Set("Client-Secret", secret)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("popup stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 400))
		resp.Body.Close()
		return nil, fmt.Errorf("popup stream: HTTP %d: %s", resp.StatusCode, b)
	}
	p := &popupProbe{sent: map[string]time.Time{}, got: map[string]time.Time{}, body: resp.Body, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() { p.done <- p.read(resp.Body, ready) }()
	select {
	case <-ready:
		return p, nil
	case err := <-p.done:
		return nil, fmt.Errorf("popup stream ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		resp.Body.Close()
		return nil, errors.New("popup stream: no ready event within 10s")
	}
}

// read parses the event stream: "event: <name>" then "data: <json>" lines, a blank line ending
// each event.
func (p *popupProbe) read(r io.Reader, ready chan struct{}) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var name string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name == "ready" && ready != nil {
				close(ready)
				ready = nil
			}
			if name == "popup" {
				var msg struct {
					ProviderCallID string `json:"providerCallId"`
				}
				if json.Unmarshal(data.Bytes(), &msg) == nil {
					at := time.Now()
					p.mu.Lock()
					if _, seen := p.got[msg.ProviderCallID]; !seen {
						p.got[msg.ProviderCallID] = at
					}
					p.mu.Unlock()
				}
			}
			name = ""
			data.Reset()
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimSpace(strings.TrimPrefix(line, "data:")))
		}
	}
	return sc.Err()
}

// wrap times the call_received requests of do.
func (p *popupProbe) wrap(do doer) doer {
	return func(ctx context.Context, req request) error {
		if req.kind == reqReceived {
			if id := providerCallID(req.body); id != "" {
				p.mu.Lock()
				p.sent[id] = time.Now()
				p.mu.Unlock()
			}
		}
		return do(ctx, req)
	}
}

// providerCallID finds the providerCallId in a body the bench made.
func providerCallID(body []byte) string {
	const key = `"providerCallId":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// latencies returns the sorted latencies of the popups that arrived and how many did not.
func (p *popupProbe) latencies() ([]time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ds []time.Duration
	missing := 0
	for id, s := range p.sent {
		g, ok := p.got[id]
		if !ok {
			missing++
			continue
		}
		ds = append(ds, g.Sub(s))
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
	return ds, missing
}

func (p *popupProbe) close() { p.body.Close() }

// instantAdapter is a caller lookup adapter that answers at once with one client, and counts
// the lookups it served.
type instantAdapter struct {
	srv   *http.Server
	url   string
	mu    sync.Mutex
	calls int64
}

func startInstantAdapter() (*instantAdapter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &instantAdapter{url: "http://" + ln.Addr().String() + "/lookup"}
	a.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.calls++
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"clients":[{"externalId":"bench-1","name":"Bench Client"}]}`)
	})}
	go a.srv.Serve(ln)
	return a, nil
}

func (a *instantAdapter) lookups() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// popupPhase measures the popup latency: the organization is given an instant lookup adapter,
// a workstation subscribes to the stream of the calls' location, and the usual call mix runs
// against the server, timing every call_received from its POST to its popup: first at a light
// load, lightCalls calls started lightRate a second, open loop (skipped when the rate is 0), then
// at full load, closed loop with spec.workers workers for spec.duration. The phaseRun is both
// runs' calls and events. The organization has no lookup again when it returns: the adapter is
// gone, and a server that went on asking it would fail each lookup and open its breaker.
func popupPhase(ctx context.Context, st store.Store, orgID string, client *http.Client, base string,
	spec phaseSpec, mix callMix, service doer, lightRate float64, lightCalls int64, settle time.Duration, logf func(string, ...any)) (phaseRun, popupReport, *popupReport, error) {
	var light *popupReport
	var both phaseRun
	full, err := func() (_ popupReport, err error) {
		adapter, err := startInstantAdapter()
		if err != nil {
			return popupReport{}, err
		}
		defer adapter.srv.Close()
		if err := st.UpdateOrgLookup(ctx, orgID, store.Lookup{URL: adapter.url}); err != nil {
			return popupReport{}, fmt.Errorf("set lookup: %w", err)
		}
		defer func() {
			if rerr := st.UpdateOrgLookup(context.WithoutCancel(ctx), orgID, store.Lookup{}); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove lookup: %w", rerr))
			}
		}()
		cred := auth.NewCredential()
		now := time.Now().UTC()
		if err := st.CreateKey(ctx, store.Key{ClientID: cred.ClientID, OrgID: orgID, Scopes: []string{auth.ScopePopupsRead},
			SecretHash: cred.SecretHash, SecretLast8: cred.SecretLast8, CreatedAt: now}); err != nil {
			return popupReport{}, fmt.Errorf("create popup key: %w", err)
		}
		// The server reads an organization's lookup settings at most every few seconds.
		logf("popup phase: lookup adapter %s; waiting %v for the server to see it", adapter.url, settle)
		select {
		case <-time.After(settle):
		case <-ctx.Done():
			return popupReport{}, ctx.Err()
		}
		streamClient := &http.Client{Transport: client.Transport}
		measure := func(label string, probeStalls bool, run func(phaseSpec, doer) (phaseRun, error)) (phaseRun, popupReport, error) {
			probe, err := startPopupProbe(ctx, streamClient, base, cred.ClientID, cred.Secret, "front-desk")
			if err != nil {
				return phaseRun{}, popupReport{}, err
			}
			defer probe.close()
			sp := spec
			sp.label = spec.label + "-" + label
			var stalls *stallReport
			stopStalls := func() {}
			if probeStalls {
				stop := startStallProbe(ctx)
				stopStalls = func() { r := stop(); stalls = &r }
			}
			before := sampleCPU(0)
			pr, err := run(sp, probe.wrap(service))
			stopStalls()
			if err != nil {
				return pr, popupReport{}, err
			}
			var host *float64
			if untold, steal, ok := hostShare(before, sampleCPU(0), runtime.NumCPU()); ok {
				h := untold + steal
				host = &h
			}
			// Popups of the last calls may still be on their way.
			time.Sleep(time.Second)
			ds, missing := probe.latencies()
			return pr, popupReport{Seconds: pr.Elapsed.Seconds(), Calls: pr.Calls, Received: len(ds), Missing: missing,
				Latency: summarize(ds), Lookups: adapter.lookups(), HostShare: host, Stalls: stalls}, nil
		}
		if lightRate > 0 {
			pr, rep, err := measure("light", true, func(sp phaseSpec, do doer) (phaseRun, error) {
				// The p99 of a few hundred popups is one of the slowest few, so the phase runs to
				// a count of calls rather than a time: the deadline only bounds a run whose ticks
				// fall behind.
				sp.maxCalls = lightCalls
				sp.duration = time.Duration(1.25 * float64(lightCalls) / lightRate * float64(time.Second))
				return runOpenLoop(ctx, sp, mix, do, lightRate)
			})
			if err != nil {
				return popupReport{}, err
			}
			rep.Rate = lightRate
			both, light = pr, &rep
			logf("popups at %g calls/s: %d of %d arrived, p50 %.2fms p99 %.2fms", lightRate, rep.Received, rep.Received+rep.Missing, rep.Latency.P50ms, rep.Latency.P99ms)
		}
		pr, rep, err := measure("full", false, func(sp phaseSpec, do doer) (phaseRun, error) { return runPhase(ctx, sp, mix, do) })
		if err != nil {
			return popupReport{}, err
		}
		if light != nil {
			rep.Lookups -= light.Lookups // the adapter counts both runs' lookups
		}
		both.Calls += pr.Calls
		both.Events += pr.Events
		return rep, nil
	}()
	return both, full, light, err
}
