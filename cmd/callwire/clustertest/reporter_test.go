package clustertest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callwire/callwire/sdk"
)

// The requests of one call, as a SIP proxy beside a clinic's PBX reports it: the ringing alone
// (it lights the desks), the answer alone, then the end, the recording and the transcript in one
// batch. The raw objects carry the SIP messages the events were read from.
const (
	receivedBody = `{"type":"call_received","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":1,` +
		`"provider":"sip","observer":"proxy","locations":{{LOCS}},` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"raw":{"transport":"udp","source":"198.51.100.20:5060","message":"` +
		`INVITE sip:101@pbx.clinic.example SIP/2.0\r\n` +
		`Via: SIP/2.0/UDP 198.51.100.20:5060;branch=z9hG4bK776asdhds;rport\r\n` +
		`From: <sip:{{NUM}}@gw1.carrier.example>;tag=1928301774\r\n` +
		`To: <sip:101@pbx.clinic.example>\r\n` +
		`Call-ID: {{ID}}\r\n` +
		`CSeq: 314159 INVITE\r\n` +
		`Content-Type: application/sdp\r\n` +
		`Content-Length: 142\r\n"}}`

	answeredBody = `{"type":"call_answered","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":2,` +
		`"provider":"sip","observer":"proxy","locations":{{LOCS}},` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"answeredBy":"101",` +
		`"raw":{"transport":"udp","source":"10.0.0.5:5060","message":"` +
		`SIP/2.0 200 OK\r\n` +
		`From: <sip:{{NUM}}@gw1.carrier.example>;tag=1928301774\r\n` +
		`To: <sip:101@pbx.clinic.example>;tag=a6c85cf\r\n` +
		`Call-ID: {{ID}}\r\n` +
		`CSeq: 314159 INVITE\r\n` +
		`Content-Length: 131\r\n"}}`

	tailBody = `{"events":[` +
		`{"type":"call_ended","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":3,` +
		`"provider":"sip","observer":"proxy","locations":{{LOCS}},` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"disposition":"answered","duration":187.4,"talkTime":171.9,"answeredElsewhere":false,` +
		`"sipCode":200,"sipReason":"OK",` +
		`"raw":{"transport":"udp","source":"198.51.100.20:5060","message":"` +
		`BYE sip:101@10.0.0.5:5060 SIP/2.0\r\n` +
		`Call-ID: {{ID}}\r\n` +
		`CSeq: 314160 BYE\r\n` +
		`Content-Length: 0\r\n"}},` +
		`{"type":"call_recorded","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":4,` +
		`"provider":"sip","observer":"proxy","locations":{{LOCS}},` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"url":"https://recordings.clinic.example/2026/12/{{ID}}.wav","mimeType":"audio/wav",` +
		`"bytes":2998400,"duration":187.4},` +
		`{"type":"call_transcribed","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":5,` +
		`"provider":"sip","observer":"proxy","locations":{{LOCS}},` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"text":"Hello, I would like to move my appointment on Thursday to the following week, ` +
		`ideally in the morning.","language":"en-GB","confidence":0.93}` +
		`]}`
)

// callRequests are the bodies of one call and the sequences each carries.
var callRequests = []struct {
	body string
	seqs []int
}{
	{receivedBody, []int{1}},
	{answeredBody, []int{2}},
	{tailBody, []int{3, 4, 5}},
}

// locationSets are the locations a call names, in turn: most calls ring one desk group, some
// ring two (a transfer group).
var locationSets = [][]string{{"front-desk"}, {"lab"}, {"front-desk"}, {"front-desk", "lab"}}

// post is one request a reporter sent and what came of it.
type post struct {
	call      string // providerCallId
	locations []string
	seqs      []int
	rings     bool // the request carries the call_received
	start     time.Time
	end       time.Time
	attempts  int
	err       error // nil when the server acknowledged the request
}

// countingTransport counts the attempts its client sends.
type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

// RoundTrip counts the attempt and sends it.
func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// reporters post calls through the load balancer with the SDK until their context ends, and keep
// every request's outcome.
type reporters struct {
	mu    sync.Mutex
	posts []post
	stem  string
}

// newReporters returns reporters whose calls' ids start with a stem of the run's own.
func newReporters() *reporters {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return &reporters{stem: hex.EncodeToString(b[:])}
}

// run starts n reporters on base with the key and returns once all of them have finished their
// current call after ctx ended.
func (r *reporters) run(ctx context.Context, n int, base, clientID, secret string) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		attempts := &atomic.Int64{}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		c, err := sdk.New(base, sdk.Credential{ClientID: clientID, Secret: secret}, sdk.Options{
			HTTPClient:  &http.Client{Timeout: 5 * time.Second, Transport: countingTransport{base: tr, n: attempts}},
			MaxAttempts: 12, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
			MaxRetryAfter: 3 * time.Second,
		})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.report(ctx, w, c, attempts)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// report posts one call after another, each call's requests in order with a short pause between
// them, until ctx ends. A call whose request was not acknowledged is not continued.
func (r *reporters) report(ctx context.Context, w int, c *sdk.Client, attempts *atomic.Int64) error {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("%s-r%d-%d@pbx.clinic.example", r.stem, w, n)
		locs := locationSets[(w+n)%len(locationSets)]
		num := "+44207" + strconv.Itoa(1000000+(w*7919+n*104729)%9000000)
		for _, req := range callRequests {
			body := strings.NewReplacer("{{ID}}", id, "{{NUM}}", num, "{{LOCS}}", `["`+strings.Join(locs, `","`)+`"]`,
				"{{AT}}", time.Now().UTC().Format(time.RFC3339Nano)).Replace(req.body)
			before := attempts.Load()
			p := post{call: id, locations: locs, seqs: req.seqs, rings: req.seqs[0] == 1, start: time.Now()}
			// The run's end does not cut a request short: its outcome is part of the check.
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
			_, p.err = c.Post(pctx, []byte(body))
			cancel()
			p.end = time.Now()
			p.attempts = int(attempts.Load() - before)
			r.mu.Lock()
			r.posts = append(r.posts, p)
			r.mu.Unlock()
			if p.err != nil {
				break
			}
			// The pause between two reports of a call, as a phone call paces them, not a wait
			// for anything: the phone rings 1 to 2.5s before it is answered, and the end, the
			// recording and the transcript follow the answer closely.
			pause := time.Duration(50+rand.IntN(150)) * time.Millisecond
			if p.rings {
				pause = time.Duration(1000+rand.IntN(1500)) * time.Millisecond
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(pause):
			}
		}
	}
	return nil
}

// all returns every request sent so far.
func (r *reporters) all() []post {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]post(nil), r.posts...)
}
