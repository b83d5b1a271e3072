package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nyaruka/phonenumbers"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// The read bench's store (-read) is filled with a clinic group's year: readOrgs organizations of
// very different sizes (the k-th largest gets a share of the calls proportional to 1/k, so the
// largest holds about a fifth of them and the smallest a five-hundredth), their calls spread
// evenly over the year before the fill, each written through the store's own WriteCalls by the
// ingest pipeline (ingest.Service.Ingest, as the server writes a report), so that every column
// the read side uses (the summary, call_no, cb_number) and the to-call-back list come out
// exactly as the write path makes them. A call's events go in one write with other calls of its
// organization; the store's merge rules make a call's row the same whatever writes its events
// came in.
//
// The mix: 60% of calls inbound, 30% outbound, 10% internal. Of the inbound, 20% are missed
// (rang out, busy, or the caller gave up) and 8% reach voicemail (with a recording of the
// message); the rest are answered, most recorded and many transcribed, more than half put on hold. 3% of
// inbound callers withhold their number. Outbound calls go to the same numbers that call in
// (callbacks), so numbers repeat as a clinic's patients do: each organization has a pool of
// numbers of its country, a sixth as many as its calls, most calls drawn from it evenly and a
// third from its first hundredth (the frequent callers).

// readOrgs is how many organizations the read bench's store holds.
const readOrgs = 100

// readFillCallsPerWrite is how many calls, with all their events, one write of the fill holds.
const readFillCallsPerWrite = 100

// readRegions are the organizations' time zones and countries, in turn; the last has neither
// (UTC, and only E.164 and trailing digits match a number search).
var readRegions = [...]store.Region{
	{TimeZone: "Europe/London", Country: "GB"},
	{TimeZone: "America/New_York", Country: "US"},
	{TimeZone: "Europe/Berlin", Country: "DE"},
	{TimeZone: "Europe/Paris", Country: "FR"},
	{TimeZone: "Australia/Sydney", Country: "AU"},
	{TimeZone: "Europe/Amsterdam", Country: "NL"},
	{},
}

// readProviders are the providers the organizations' calls are filed under, in turn.
var readProviders = [...]string{"sip", "asterisk", "sip", "ringcentral"}

// readOrgID returns the id of the read bench's k-th organization (from 0, the largest first).
func readOrgID(k int) string { return fmt.Sprintf("readbench-%03d", k) }

// readOrg is one organization of the read bench's store, as the fill generates its calls.
type readOrg struct {
	id        string
	region    store.Region
	provider  string
	share     float64  // of all calls
	main      string   // the clinic's own number, which inbound calls are to
	numbers   []string // its callers' numbers, E.164
	exts      []string
	locations []string
	calls     int64 // generated so far
}

// readShares returns each organization's share of the calls: 1/k, normalized.
func readShares() []float64 {
	s := make([]float64, readOrgs)
	var sum float64
	for k := range s {
		s[k] = 1 / float64(k+1)
		sum += s[k]
	}
	for k := range s {
		s[k] /= sum
	}
	return s
}

// newReadOrgs returns the organizations of a store of about calls calls, their number pools
// drawn with r.
func newReadOrgs(r *rand.Rand, calls int64) []*readOrg {
	orgs := make([]*readOrg, readOrgs)
	for k, share := range readShares() {
		o := &readOrg{id: readOrgID(k), region: readRegions[k%len(readRegions)], provider: readProviders[k%len(readProviders)], share: share}
		country := o.region.Country
		if country == "" {
			country = "GB"
		}
		o.main = randomNumber(r, country)
		n := max(40, int(share*float64(calls)/6))
		o.numbers = make([]string, n)
		for i := range o.numbers {
			o.numbers[i] = randomNumber(r, country)
		}
		for i := range 5 + int(share*float64(calls)/20000) {
			o.exts = append(o.exts, strconv.Itoa(201+i))
		}
		for i := range 1 + k%4 {
			o.locations = append(o.locations, [...]string{"front-desk", "north", "south", "east"}[i])
		}
		orgs[k] = o
	}
	return orgs
}

// randomNumber returns a valid E.164 number of country (as libphonenumber judges it), made from
// the country's example fixed-line number with its last six digits drawn at random.
func randomNumber(r *rand.Rand, country string) string {
	ex := phonenumbers.GetExampleNumberForType(country, phonenumbers.FIXED_LINE)
	nsn := []byte(phonenumbers.GetNationalSignificantNumber(ex))
	for range 50 {
		for i := max(0, len(nsn)-6); i < len(nsn); i++ {
			nsn[i] = byte('0' + r.IntN(10))
		}
		n, err := phonenumbers.Parse("+"+strconv.Itoa(int(ex.GetCountryCode()))+string(nsn), "")
		if err == nil && phonenumbers.IsValidNumberForRegion(n, country) {
			return phonenumbers.Format(n, phonenumbers.E164)
		}
	}
	return phonenumbers.Format(ex, phonenumbers.E164)
}

// pick returns a caller's number of o: two thirds of the time any of its pool, else one of
// its frequent callers.
func (o *readOrg) pick(r *rand.Rand) string {
	if r.IntN(3) > 0 {
		return o.numbers[r.IntN(len(o.numbers))]
	}
	return o.numbers[r.IntN(max(1, len(o.numbers)/100))]
}

// readCall returns the events of a call of o starting at start, the n-th of o's.
func (o *readOrg) readCall(r *rand.Rand, n int64, start time.Time) []event.Event {
	pcid := strconv.FormatUint(r.Uint64()|1<<63, 16) + "-" + strconv.FormatInt(n, 10) + "@pbx.clinic.example"
	ext := func() string { return o.exts[r.IntN(len(o.exts))] }
	loc := []string{o.locations[r.IntN(len(o.locations))]}
	raw := []byte(`{"pbx":"clinic-pbx-1","uniqueid":"` + strconv.FormatInt(start.Unix(), 10) + "." + strconv.FormatInt(n, 10) + `"}`)
	var call event.Call
	first := event.CallPlaced
	answered, voicemail := false, false
	var disposition event.Disposition
	switch d := r.Float64(); {
	case d < 0.6:
		first = event.CallReceived
		from := event.E164(o.pick(r))
		if r.IntN(100) < 3 {
			from = event.Anonymous()
		}
		call = event.Call{Direction: event.Inbound, From: from, To: event.E164(o.main)}
		switch x := r.Float64(); {
		case x < 0.20:
			disposition = [...]event.Disposition{event.DispositionNoAnswer, event.DispositionCancelled, event.DispositionBusy}[r.IntN(3)]
		case x < 0.28:
			voicemail, disposition = true, event.DispositionVoicemail
		default:
			answered, disposition = true, event.DispositionAnswered
		}
	case d < 0.9:
		call = event.Call{Direction: event.Outbound, From: event.Extension(ext()), To: event.E164(o.pick(r))}
		answered = r.IntN(4) > 0
	default:
		call = event.Call{Direction: event.Internal, From: event.Extension(ext()), To: event.Extension(ext())}
		answered = r.IntN(5) > 0
	}
	if disposition == "" {
		disposition = event.DispositionNoAnswer
		if answered {
			disposition = event.DispositionAnswered
		}
	}
	var evs []event.Event
	add := func(t event.Type, at time.Time) *event.Event {
		e := event.New(t, pcid, at, call)
		e.Provider, e.Sequence, e.Locations, e.Raw = o.provider, int64(len(evs)+1), loc, raw
		evs = append(evs, e)
		return &evs[len(evs)-1]
	}
	add(first, start)
	ring := time.Duration(3+r.IntN(25)) * time.Second
	at := start.Add(ring)
	var talk float64
	if answered {
		a := add(event.CallAnswered, at)
		a.AnsweredBy = ext()
		if call.Direction == event.Internal {
			a.AnsweredBy = call.To.Extension
		}
		talk = float64(20 + r.IntN(600))
		if r.IntN(10) < 6 {
			add(event.CallHold, at.Add(10*time.Second))
			h := add(event.CallHold, at.Add(40*time.Second))
			h.Released = event.Ptr(true)
		}
	} else if voicemail {
		talk = 0
		at = at.Add(time.Duration(10+r.IntN(60)) * time.Second)
	}
	end := at.Add(time.Duration(talk) * time.Second)
	e := add(event.CallEnded, end)
	e.Disposition = disposition
	e.Duration = event.Ptr(end.Sub(start).Seconds())
	if answered {
		e.TalkTime = event.Ptr(talk)
		e.SIPCode = event.Ptr(200)
	} else {
		e.SIPCode = event.Ptr(map[event.Disposition]int{event.DispositionBusy: 486, event.DispositionCancelled: 487}[disposition])
		if *e.SIPCode == 0 {
			e.SIPCode = event.Ptr(480)
		}
	}
	recorded := voicemail || (answered && call.Direction != event.Internal && r.IntN(10) < 8)
	if recorded {
		rec := add(event.CallRecorded, end.Add(2*time.Second))
		rec.URL = "https://recordings.clinic.example/" + o.id + "/" + pcid + ".wav"
		rec.MIMEType = "audio/wav"
		rec.Bytes = event.Ptr(int64(16000 * max(talk, 15)))
		rec.Duration = event.Ptr(max(talk, 15))
		if r.IntN(10) < 7 {
			tr := add(event.CallTranscribed, end.Add(30*time.Second))
			tr.Text = "Hello, I am calling about my appointment next week; please call me back."
			tr.Language = "en-GB"
			tr.Confidence = event.Ptr(0.92)
		}
	}
	return evs
}

// readFillBatch is one write of the fill: calls of one organization.
type readFillBatch struct {
	org    *readOrg
	events []event.Event
	calls  int
}

// readFillResult is what a fill wrote.
type readFillResult struct {
	calls, events int64
	took          time.Duration
}

// fillReadStore creates the read bench's organizations in st and writes about events events of
// their calls through the ingest pipeline on st, workers writes at a time (see the comment at
// the top of this file). The calls are drawn from a generator seeded with events, so that a
// fill that was interrupted is resumed by filling again: the same calls come out, and the writes
// already on file are skipped. It returns what the fill holds.
func fillReadStore(ctx context.Context, st store.Store, events int64, workers int, logf func(string, ...any)) (readFillResult, error) {
	start := time.Now()
	r := rand.New(rand.NewPCG(uint64(events), 48))
	// How many events a call has, on average, decides how many calls make events.
	var sample int64
	probe := &readOrg{id: "probe", main: "+442071230000", numbers: []string{"+442071230001"}, exts: []string{"201"}, locations: []string{"front-desk"}, provider: "sip"}
	for i := range 10000 {
		sample += int64(len(probe.readCall(r, int64(i), start)))
	}
	perCall := float64(sample) / 10000
	calls := int64(math.Ceil(float64(events) / perCall))
	orgs := newReadOrgs(r, calls)
	now := start.UTC()
	for k, o := range orgs {
		err := st.CreateOrg(ctx, store.Org{ID: o.id, Name: "Read bench clinic " + strconv.Itoa(k), CreatedAt: now, Region: o.region})
		if err != nil && !errors.Is(err, store.ErrConflict) { // on file: a fill resumed
			return readFillResult{}, fmt.Errorf("create organization %s: %w", o.id, err)
		}
	}
	svc, err := ingest.New(ingest.Options{Writer: st, Logger: slog.New(slog.DiscardHandler), WriteTimeout: 5 * time.Minute})
	if err != nil {
		return readFillResult{}, err
	}
	logf("fill: about %d calls (%.2f events a call) over %d organizations, %d writes at a time", calls, perCall, readOrgs, workers)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan readFillBatch, 2*workers)
	var wrote, wroteCalls atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for b := range batches {
				if err := writeReadBatch(ctx, st, svc, b); err != nil {
					errs[w] = err
					cancel()
					// Drained, so that the generator never waits on a worker that has stopped.
					for range batches {
					}
					return
				}
				wroteCalls.Add(int64(b.calls))
				wrote.Add(int64(len(b.events)))
			}
		})
	}

	// Calls are generated in the order they start, a year before now to now; each goes to an
	// organization drawn by its share and waits in its organization's batch.
	cum := make([]float64, len(orgs))
	var acc float64
	for k, o := range orgs {
		acc += o.share
		cum[k] = acc
	}
	span := 365 * 24 * time.Hour
	base := now.Add(-span)
	pending := make([]readFillBatch, len(orgs))
	var generated, genCalls int64
	lastLog := time.Now()
	send := func(k int) bool {
		select {
		case batches <- pending[k]:
			pending[k] = readFillBatch{}
			return true
		case <-ctx.Done():
			return false
		}
	}
gen:
	for i := int64(0); generated < events; i++ {
		k, _ := slices.BinarySearch(cum, r.Float64())
		k = min(k, len(orgs)-1)
		o := orgs[k]
		at := base.Add(time.Duration(float64(span) * float64(i) / float64(calls))).Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		if at.After(now) {
			at = now.Add(-time.Duration(r.IntN(60)) * time.Second)
		}
		evs := o.readCall(r, o.calls, at)
		o.calls++
		genCalls++
		generated += int64(len(evs))
		b := &pending[k]
		b.org = o
		b.events = append(b.events, evs...)
		b.calls++
		if b.calls == readFillCallsPerWrite && !send(k) {
			break gen
		}
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			logf("fill: %d of %d events written (%.0f a second)", wrote.Load(), events, float64(wrote.Load())/time.Since(start).Seconds())
		}
	}
	for k := range pending {
		if pending[k].calls > 0 && !send(k) {
			break
		}
	}
	close(batches)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return readFillResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return readFillResult{}, err
	}
	res := readFillResult{calls: wroteCalls.Load(), events: wrote.Load(), took: time.Since(start)}
	logf("fill: %d calls and %d events written in %v (%.0f events a second)", res.calls, res.events,
		res.took.Round(time.Second), float64(res.events)/res.took.Seconds())
	return res, nil
}

// writeReadBatch writes b through svc as reports of at most event.MaxBatch events each, parsed
// as the endpoint parses them, in one Ingest, unless b is on file already (a fill resumed: a
// write is atomic, so its first event on file means all of it is). A write the store reports
// unavailable is tried again after a pause, as a reporter does, up to ten times.
func writeReadBatch(ctx context.Context, st store.Store, svc *ingest.Service, b readFillBatch) error {
	first := b.events[0]
	known, err := st.KnownEvents(ctx, b.org.id, []store.EventRef{{Provider: first.Provider, ProviderCallID: first.ProviderCallID,
		DedupeKey: string(first.Type) + ":" + strconv.FormatInt(first.Sequence, 10)}}, nil)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	if known[0] {
		return nil
	}
	var parsed []event.Parsed
	for from := 0; from < len(b.events); from += event.MaxBatch {
		body := []byte(`{"events":[`)
		for i, e := range b.events[from:min(len(b.events), from+event.MaxBatch)] {
			if i > 0 {
				body = append(body, ',')
			}
			var err error
			if body, err = e.AppendJSON(body); err != nil {
				return fmt.Errorf("fill: encode: %w", err)
			}
		}
		body = append(body, "]}"...)
		ps, _, err := event.ParseBody(body)
		if err != nil {
			return fmt.Errorf("fill: parse: %w", err)
		}
		parsed = append(parsed, ps...)
	}
	for try := 1; ; try++ {
		_, err := svc.Ingest(ctx, b.org.id, "", parsed, nil)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ingest.ErrUnavailable) || try == 10 {
			return fmt.Errorf("fill: write %d calls of %s: %w", b.calls, b.org.id, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}
