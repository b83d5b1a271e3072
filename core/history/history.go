// Package history reads an organization's call history for the API: it parses a list's query
// (filters read in the organization's time zone and country, and the cursor), reads pages of
// calls from the store, and shows each call as the API and the CSV export do. It keeps nothing
// between requests: the store's summary columns (store.Summary) are what it filters and sorts
// on, and a cursor carries the position it continues from.
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// ErrNotFound reports that the organization has no such call.
var ErrNotFound = errors.New("no such call")

// ErrUnavailable marks a failure to read that is expected to pass; ask again later.
var ErrUnavailable = errors.New("call history unavailable")

// QueryError is a list query refused as it stands: each problem names its parameter.
type QueryError struct {
	Problems []string
}

// Error joins the problems.
func (e *QueryError) Error() string { return "bad query: " + strings.Join(e.Problems, "; ") }

// Reader is what the history reads of the store.
type Reader interface {
	GetOrg(ctx context.Context, id string) (store.Org, error)
	GetCallByID(ctx context.Context, orgID, id string) (store.Call, []store.Event, error)
	ListCalls(ctx context.Context, orgID string, f store.CallFilter, after *store.CallPosition, limit int) ([]store.CallRecord, error)
}

// Service answers the call history's reads. It is safe for concurrent use.
type Service struct {
	r Reader
}

// New returns a Service reading from r, which must not be nil.
func New(r Reader) (*Service, error) {
	if r == nil {
		return nil, errors.New("history: a Reader is required")
	}
	return &Service{r: r}, nil
}

// Query is a parsed, checked list query of one organization.
type Query struct {
	orgID   string
	q       listQuery
	loc     *time.Location
	country string
}

// Prepare reads the query parameters of a list for the organization, in its time zone and
// country. A query refused as it stands is a *QueryError naming every bad parameter; forCSV
// refuses a cursor, since the export has every matching call.
func (s *Service) Prepare(ctx context.Context, orgID string, params url.Values, forCSV bool) (Query, error) {
	org, err := s.r.GetOrg(ctx, orgID)
	if err != nil {
		return Query{}, wrap("read the organization", err)
	}
	loc, err := org.Region.Location()
	if err != nil {
		return Query{}, fmt.Errorf("history: the organization's time zone: %w", err)
	}
	lq, problems := parseListQuery(params, orgID, loc, org.Region.Country)
	if forCSV && params.Has("cursor") {
		problems = append(problems, "cursor: the CSV export has every matching call; leave the cursor out")
	}
	if len(problems) > 0 {
		return Query{}, &QueryError{Problems: problems}
	}
	return Query{orgID: orgID, q: lq, loc: loc, country: org.Region.Country}, nil
}

// Page is one page of a list: its calls, newest first, the cursor of the next page (nil when
// there is none), and the organization's time zone (IANA), in which the dates of from and until
// are read and a client shows local times.
type Page struct {
	Items    []Item  `json:"items"`
	Next     *string `json:"next"`
	TimeZone string  `json:"timeZone"`
}

// Page reads the page q asks for.
func (s *Service) Page(ctx context.Context, q Query) (Page, error) {
	recs, err := s.r.ListCalls(ctx, q.orgID, q.q.filter, q.q.after, q.q.limit+1)
	if err != nil {
		return Page{}, wrap("list calls", err)
	}
	p := Page{Items: make([]Item, 0, min(len(recs), q.q.limit)), TimeZone: q.loc.String()}
	for i := range recs {
		if i == q.q.limit {
			next := encodeCursor(recs[i-1].Call.Position(), q.q.scope)
			p.Next = &next
			break
		}
		p.Items = append(p.Items, NewItem(&recs[i].Call, recs[i].Events))
	}
	return p, nil
}

// Call returns the organization's call id with its events, or ErrNotFound, also when another
// organization has a call of that id.
func (s *Service) Call(ctx context.Context, orgID, id string) (Item, error) {
	c, events, err := s.r.GetCallByID(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return Item{}, fmt.Errorf("history: call %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Item{}, wrap("read a call", err)
	}
	it := NewItem(&c, events)
	it.Events = make([]json.RawMessage, 0, len(events))
	for i := range events {
		b, err := eventItem(&events[i])
		if err != nil {
			return Item{}, fmt.Errorf("history: event %q: %w", events[i].ID, err)
		}
		it.Events = append(it.Events, b)
	}
	return it, nil
}

// wrap names what failed, marking a transient store failure ErrUnavailable.
func wrap(what string, err error) error {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("history: %s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("history: %s: %w", what, err)
}

// Item is a call as the history shows it (docs/api/openapi.yaml, CallItem).
type Item struct {
	ID                string            `json:"id"`
	Provider          string            `json:"provider"`
	ProviderCallID    string            `json:"providerCallId"`
	Direction         string            `json:"direction"`
	From              json.RawMessage   `json:"from"`
	To                json.RawMessage   `json:"to"`
	State             string            `json:"state"`
	Outcome           string            `json:"outcome"`
	Disposition       *string           `json:"disposition"`
	StartedAt         time.Time         `json:"startedAt"`
	AnsweredAt        *time.Time        `json:"answeredAt"`
	EndedAt           *time.Time        `json:"endedAt"`
	Duration          *float64          `json:"duration"`
	TalkTime          *float64          `json:"talkTime"`
	AnsweredBy        *string           `json:"answeredBy"`
	AnsweredElsewhere bool              `json:"answeredElsewhere"`
	Locations         json.RawMessage   `json:"locations"`
	CRMClients        json.RawMessage   `json:"crmClients"`
	Recordings        []Recording       `json:"recordings"`
	Transcribed       bool              `json:"transcribed"`
	SIPCode           *int              `json:"sipCode"`
	SIPReason         *string           `json:"sipReason"`
	Events            []json.RawMessage `json:"events,omitempty"`
}

// Recording is one call_recorded, as the history shows it.
type Recording struct {
	URL      string   `json:"url"`
	MIMEType *string  `json:"mimeType"`
	Bytes    *int64   `json:"bytes"`
	Duration *float64 `json:"duration"`
}

var jsonNull = json.RawMessage("null")

// NewItem builds the history's view of c from its events, ordered as the store orders them.
// The call_ended said last (in that order) gives the disposition, duration, talk time, SIP code
// and reason, and whether it was answered elsewhere; a duration or talk time it does not give is
// counted from the stored times once the call has ended.
func NewItem(c *store.Call, events []store.Event) Item {
	it := Item{
		ID: c.ID, Provider: c.Provider, ProviderCallID: c.ProviderCallID, Direction: c.Direction,
		From: jsonNull, To: jsonNull, State: c.State.String(),
		Outcome:   store.Outcome(c.State, c.Direction, c.Summary.Flags),
		StartedAt: c.FirstAt.UTC(), Locations: c.Summary.Locations, CRMClients: c.Clients,
		Recordings: []Recording{}, Transcribed: c.Summary.Flags&store.FlagTranscribed != 0,
	}
	var block struct {
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
	}
	if json.Unmarshal(c.Block, &block) == nil {
		if len(block.From) > 0 {
			it.From = block.From
		}
		if len(block.To) > 0 {
			it.To = block.To
		}
	}
	if len(it.Locations) == 0 {
		it.Locations = json.RawMessage(`["` + event.DefaultLocation + `"]`)
	}
	if len(it.CRMClients) == 0 {
		it.CRMClients = json.RawMessage("[]")
	}
	if t := c.Summary.AnsweredAt; !t.IsZero() {
		t = t.UTC()
		it.AnsweredAt = &t
	}
	if t := c.Summary.EndedAt; !t.IsZero() {
		t = t.UTC()
		it.EndedAt = &t
	}
	if c.Summary.AnsweredBy != "" {
		by := c.Summary.AnsweredBy
		it.AnsweredBy = &by
	}
	for i := range events {
		e := &events[i]
		switch e.Type {
		case string(event.CallEnded):
			var b struct {
				Disposition       string   `json:"disposition"`
				Duration          *float64 `json:"duration"`
				TalkTime          *float64 `json:"talkTime"`
				AnsweredElsewhere *bool    `json:"answeredElsewhere"`
				SIPCode           *int     `json:"sipCode"`
				SIPReason         string   `json:"sipReason"`
			}
			if json.Unmarshal(e.Body, &b) != nil {
				continue
			}
			it.Disposition, it.SIPReason = nil, nil
			if b.Disposition != "" {
				it.Disposition = &b.Disposition
			}
			if b.SIPReason != "" {
				it.SIPReason = &b.SIPReason
			}
			it.Duration, it.TalkTime, it.SIPCode = b.Duration, b.TalkTime, b.SIPCode
			it.AnsweredElsewhere = b.AnsweredElsewhere != nil && *b.AnsweredElsewhere
		case string(event.CallRecorded):
			var r Recording
			if json.Unmarshal(e.Body, &r) == nil {
				it.Recordings = append(it.Recordings, r)
			}
		}
	}
	if it.Duration == nil && it.EndedAt != nil {
		d := it.EndedAt.Sub(it.StartedAt).Seconds()
		it.Duration = &d
	}
	if it.TalkTime == nil && it.EndedAt != nil && it.AnsweredAt != nil {
		d := it.EndedAt.Sub(*it.AnsweredAt).Seconds()
		it.TalkTime = &d
	}
	return it
}

// eventItem returns e as the history shows it: the event's body as its reporter sent it, with
// what the store adds (id, receivedAt, dedupeKey) and the envelope's type, sequence and
// providerEventId given explicitly (sequence 0 and providerEventId null when the reporter left
// them out).
func eventItem(e *store.Event) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(e.Body, &fields); err != nil {
		return nil, err
	}
	set := func(name string, v any) error {
		b, err := json.Marshal(v)
		fields[name] = b
		return err
	}
	var pe any
	if e.ProviderEventID != "" {
		pe = e.ProviderEventID
	}
	if err := errors.Join(set("id", e.ID), set("type", e.Type), set("receivedAt", e.ReceivedAt.UTC()),
		set("dedupeKey", e.DedupeKey), set("sequence", e.Sequence), set("providerEventId", pe)); err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}
