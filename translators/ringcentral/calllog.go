package ringcentral

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// callLogPerPage is how many records each call-log page asks for.
const callLogPerPage = 250

// defaultRetryAfter is the wait after a 429 that gave no Retry-After.
const defaultRetryAfter = time.Minute

// The call log's published rate limit: RingCentral's API reference puts
// GET /restapi/v1.0/account/~/call-log in the Heavy usage plan group, 10 requests per 60
// seconds. The poll keeps to it when answers carry no X-Rate-Limit-* headers to pace by.
const (
	callLogGroup  = "Heavy"
	callLogLimit  = 10
	callLogWindow = 60 * time.Second
)

// callLogPage is one page of GET /restapi/v1.0/account/~/call-log?view=Detailed.
type callLogPage struct {
	Records    []callLogRecord `json:"records"`
	Navigation struct {
		NextPage *struct {
			URI string `json:"uri"`
		} `json:"nextPage"`
	} `json:"navigation"`
}

// The sequences of the events the call log yields. A call-log record describes a call once it
// is over, after every notification of its session; a session's notification sequence counts
// that session's notifications (a handful to a few dozen), far below these. So under the
// contract's order (sequence, then occurredAt) the poll's call_missed, call_ended and
// call_recorded come after every event the live path sent for the same call, and in that order
// among themselves. The sequence is not part of their identity: each carries the live path's
// providerEventId (or its own, for call_recorded), which is what the core deduplicates on.
const (
	seqCallLogMissed   = 1_000_000_000
	seqCallLogEnded    = seqCallLogMissed + 1
	seqCallLogRecorded = seqCallLogMissed + 2
)

// resultInProgress is the call-log result of a call not over yet; its record comes back, with
// a newer lastModifiedTime, when the call ends.
const resultInProgress = "In Progress"

// callLogRecord is one call of the account's call log.
type callLogRecord struct {
	ID                 string     `json:"id"`
	SessionID          flexString `json:"sessionId"`
	TelephonySessionID string     `json:"telephonySessionId"`
	StartTime          string     `json:"startTime"`
	Duration           float64    `json:"duration"`
	DurationMs         *float64   `json:"durationMs"`
	Direction          string     `json:"direction"`
	Type               string     `json:"type"`
	Result             string     `json:"result"`
	Reason             string     `json:"reason"`
	From               endpoint   `json:"from"`
	To                 endpoint   `json:"to"`
	LastModifiedTime   string     `json:"lastModifiedTime"`
	Recording          *struct {
		ID         flexString `json:"id"`
		ContentURI string     `json:"contentUri"`
		Type       string     `json:"type"`
	} `json:"recording"`
}

// cursor is how far the call log has been read: every record last modified before Modified
// (less the overlap) has been handed to the agent.
type cursor struct {
	Modified time.Time `json:"lastModifiedTime"`
}

func loadCursor(path string) (cursor, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cursor{}, false, nil
	}
	if err != nil {
		return cursor{}, false, fmt.Errorf("read cursor_file: %w", err)
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return cursor{}, false, fmt.Errorf("cursor_file %s is not a cursor: %w", path, err)
	}
	return c, true, nil
}

// saveCursor writes the cursor so that a crash leaves the old one or the new one whole.
func saveCursor(path string, c cursor) error {
	b, _ := json.Marshal(c)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save cursor: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save cursor: %w", err)
	}
	return nil
}

// poller reads closed calls from the call log and hands their call_ended and call_recorded
// events to the agent.
type poller struct {
	api      *client
	calls    *calls // for classifying parties; not its session state
	ended    *endedSet
	emit     func(context.Context, event.Event) error
	log      *slog.Logger
	path     string
	overlap  time.Duration
	lookback time.Duration
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error

	// What the last answer said of the rate limit: headers tells whether it carried
	// X-Rate-Limit-* headers, pace is how long they ask to wait before the next request, and
	// group is the group they named (callLogGroup when they named none).
	headers bool
	pace    time.Duration
	group   string
	// answers holds when the last callLogLimit requests were answered, oldest first: without
	// headers to pace by, a request waits until fewer than callLogLimit were answered within
	// callLogWindow.
	answers []time.Time
}

// pollOnce reads every record modified since the cursor (less the overlap), to the last page,
// emits their events, and only then saves the cursor. It returns how many records it read.
func (p *poller) pollOnce(ctx context.Context) (int, error) {
	cur, ok, err := loadCursor(p.path)
	if err != nil {
		return 0, err
	}
	if !ok {
		cur.Modified = p.now().Add(-p.overlap)
	}
	since := cur.Modified.Add(-p.overlap)
	q := url.Values{
		"view":     {"Detailed"},
		"type":     {"Voice"},
		"dateFrom": {since.Add(-p.lookback).UTC().Format(time.RFC3339)},
		"perPage":  {strconv.Itoa(callLogPerPage)},
		"page":     {"1"},
	}
	next := "/restapi/v1.0/account/~/call-log?" + q.Encode()
	newest := cur.Modified
	var evs []event.Event
	n := 0
	for next != "" {
		var page callLogPage
		if err := p.get(ctx, next, &page); err != nil {
			return n, err
		}
		for _, r := range page.Records {
			mod, err := time.Parse(time.RFC3339Nano, r.LastModifiedTime)
			if err != nil {
				st, serr := time.Parse(time.RFC3339Nano, r.StartTime)
				if serr != nil {
					p.log.Warn("ringcentral: call-log record without usable times skipped", "id", r.ID)
					continue
				}
				mod = st.Add(time.Duration(r.Duration * float64(time.Second)))
			}
			if mod.Before(since) {
				continue
			}
			n++
			if mod.After(newest) {
				newest = mod
			}
			evs = append(evs, p.events(r)...)
		}
		next = ""
		if page.Navigation.NextPage != nil && page.Navigation.NextPage.URI != "" && len(page.Records) > 0 {
			next = page.Navigation.NextPage.URI
		}
	}
	for _, e := range evs {
		if err := p.emit(ctx, e); err != nil {
			return n, err
		}
		if e.Type == event.CallEnded {
			p.ended.mark(e.ProviderCallID)
		}
	}
	if newest.After(cur.Modified) || !ok {
		if err := saveCursor(p.path, cursor{Modified: newest.UTC()}); err != nil {
			return n, err
		}
	}
	return n, nil
}

// get fetches one page, waiting out 429s (Retry-After) and pacing its requests: by the
// rate-limit headers of the last answer when it had them, else to the published limit of the
// call log's group (at most callLogLimit requests in any callLogWindow).
func (p *poller) get(ctx context.Context, path string, out *callLogPage) error {
	for {
		if wait, group := p.wait(); wait > 0 {
			p.log.Info("ringcentral: call-log requests paced to their rate-limit group; waiting", "group", group, "wait", wait.String())
			if err := p.sleep(ctx, wait); err != nil {
				return err
			}
		}
		h, err := p.api.do(ctx, "read the call log", "GET", path, nil, out)
		p.answered(h)
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
			wait := ae.RetryAfter
			if wait <= 0 {
				wait = defaultRetryAfter
			}
			p.log.Warn("ringcentral: call log rate limited; waiting", "group", p.group, "retry_after", wait.String())
			if err := p.sleep(ctx, wait); err != nil {
				return err
			}
			p.pace = 0
			continue
		}
		return err
	}
}

// answered notes that a call-log request was answered now, with headers h (nil when no answer
// came), and what their rate-limit headers say.
func (p *poller) answered(h http.Header) {
	if len(p.answers) == callLogLimit {
		p.answers = append(p.answers[:0], p.answers[1:]...)
	}
	p.answers = append(p.answers, p.now())
	rl, ok := readRateLimit(h)
	p.headers, p.pace, p.group = ok, 0, callLogGroup
	if ok {
		p.pace = rl.pace()
		if rl.Group != "" {
			p.group = rl.Group
		}
	}
}

// wait is how long the next call-log request must wait, and the rate-limit group that asks it:
// what the last answer's headers said, or, when it had none (or before the first answer), until
// fewer than callLogLimit requests were answered within the last callLogWindow.
func (p *poller) wait() (time.Duration, string) {
	if p.headers {
		return p.pace, p.group
	}
	if len(p.answers) < callLogLimit {
		return 0, callLogGroup
	}
	return max(p.answers[0].Add(callLogWindow).Sub(p.now()), 0), callLogGroup
}

// events are the call_missed, call_ended and call_recorded of a closed call, with the ids the
// live path gives them.
func (p *poller) events(r callLogRecord) []event.Event {
	id := r.TelephonySessionID
	if !usableID(id) {
		id = "session-" + string(r.SessionID)
	}
	if !usableID(id) || id == "session-" {
		id = "record-" + r.ID
	}
	if !usableID(id) {
		return nil
	}
	start, err := time.Parse(time.RFC3339Nano, r.StartTime)
	if err != nil {
		return nil
	}
	dur := r.Duration
	if r.DurationMs != nil {
		dur = *r.DurationMs / 1000
	}
	end := start.Add(time.Duration(dur * float64(time.Second)))
	call, locs := p.calls.callBlock(r.Direction, r.From, r.To)
	raw, _ := json.Marshal(r)
	mk := func(t event.Type, at time.Time, eid string, seq int64) event.Event {
		e := event.New(t, id, at, call)
		e.Sequence = seq
		e.Provider = p.calls.provider
		e.Observer = event.ObserverPBXAPI
		e.ProviderEventID = eid
		if len(locs) > 0 {
			e.Locations = locs
		}
		if len(raw) <= 64<<10 {
			e.Raw = raw
		}
		return e
	}
	var out []event.Event
	if r.Result == resultInProgress {
		return nil // not over: the record is read again when it is
	}
	if !p.ended.has(id) {
		disp := resultDisposition(r.Result)
		// As on the live path: an inbound call no clinic phone answered is missed.
		if call.Direction == event.Inbound && disp != event.DispositionAnswered {
			out = append(out, mk(event.CallMissed, end, idMissed, seqCallLogMissed))
		}
		e := mk(event.CallEnded, end, idEnded, seqCallLogEnded)
		e.Disposition = disp
		e.Duration = event.Ptr(max(dur, 0))
		out = append(out, e)
	}
	if r.Recording != nil && r.Recording.ContentURI != "" {
		if u, err := url.Parse(r.Recording.ContentURI); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
			rid := string(r.Recording.ID)
			if !usableID(rid) {
				rid = id
			}
			e := mk(event.CallRecorded, end, recordedID(rid), seqCallLogRecorded)
			e.URL = r.Recording.ContentURI
			out = append(out, e)
		}
	}
	return out
}

// resultDisposition maps a call-log result to a disposition. The results and what they mean
// are the API reference's (the CallLogRecord schema's result enum and the descriptions of its
// reasons): "Answered Not Accepted" goes with the reason Connected, "the call was answered, but
// there was no response on how to handle the call (for example, a voice mail system answered
// the call and did not push '1' to accept)", so nobody took it; "Stopped" is "stopped because
// the call was answered by another phone"; "Reply" is a call answered with a text reply instead.
func resultDisposition(result string) event.Disposition {
	switch result {
	case "Accepted", "Call connected", "Received", "Stopped":
		return event.DispositionAnswered
	case "Voicemail":
		return event.DispositionVoicemail
	case "Missed", "No Answer", "Answered Not Accepted":
		return event.DispositionNoAnswer
	case "Busy":
		return event.DispositionBusy
	case "Rejected", "Declined", "Blocked", "Reply":
		return event.DispositionRejected
	case "Hang Up", "Abandoned":
		return event.DispositionCancelled
	}
	return event.DispositionFailed
}
