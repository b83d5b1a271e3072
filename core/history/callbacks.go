package history

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/callwire/callwire/core/store"
)

// ErrNoCallback reports that the organization has no open to-call-back item for a number.
var ErrNoCallback = errors.New("no open item for that number")

// ErrNoCallbacks reports that the store keeps no to-call-back list (it does not implement
// store.CallbackStore).
var ErrNoCallbacks = errors.New("this server's store keeps no to-call-back list")

// CallbackItem is an item of the to-call-back list as the API shows it (docs/api/openapi.yaml,
// CallbackItem).
type CallbackItem struct {
	Number        string            `json:"number"`
	Name          *string           `json:"name"`
	MissedCount   int               `json:"missedCount"`
	FirstMissedAt time.Time         `json:"firstMissedAt"`
	LastMissedAt  time.Time         `json:"lastMissedAt"`
	LastCallID    string            `json:"lastCallId"`
	Locations     []string          `json:"locations"`
	Voicemail     bool              `json:"voicemail"`
	State         string            `json:"state"`
	ClosedAt      *time.Time        `json:"closedAt"`
	ClosedBy      *CallbackClosedBy `json:"closedBy"`
}

// CallbackClosedBy says how an item closed: reason called_back, answered, dismissed or expired,
// the call that closed it (null for a dismissal or an expiry) and the extension, when known.
type CallbackClosedBy struct {
	Reason    string  `json:"reason"`
	CallID    *string `json:"callId"`
	Extension *string `json:"extension"`
}

// CallbackPage is one page of the to-call-back list, newest miss first, and the cursor of the
// next page, nil when there is none.
type CallbackPage struct {
	Items []CallbackItem `json:"items"`
	Next  *string        `json:"next"`
}

// NewCallbackItem shows cb as the API does.
func NewCallbackItem(cb store.Callback) CallbackItem {
	it := CallbackItem{
		Number: cb.Number, Name: strPtr(cb.Name), MissedCount: cb.MissedCount,
		FirstMissedAt: cb.FirstMissedAt.UTC(), LastMissedAt: cb.LastMissedAt.UTC(), LastCallID: cb.LastCallID,
		Locations: cb.Locations, Voicemail: cb.Voicemail, State: "open",
	}
	if it.Locations == nil {
		it.Locations = []string{}
	}
	if !cb.Open {
		it.State = "closed"
		t := cb.ClosedAt.UTC()
		it.ClosedAt = &t
	}
	if b := cb.ClosedBy; b != nil {
		it.ClosedBy = &CallbackClosedBy{Reason: b.Reason, CallID: strPtr(b.CallID), Extension: strPtr(b.Extension)}
	}
	return it
}

// strPtr returns nil for "", else a pointer to s.
func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// callbackParams are the parameters GET /api/v1/callbacks takes.
var callbackParams = []string{"state", "location", "limit", "cursor"}

// callbacks returns the store's to-call-back list, or ErrNoCallbacks.
func (s *Service) callbacks() (store.CallbackStore, error) {
	cs, ok := s.r.(store.CallbackStore)
	if !ok {
		return nil, ErrNoCallbacks
	}
	return cs, nil
}

// Callbacks reads the page of the organization's to-call-back list that params ask for:
// state (open, the default, or closed), location, limit (1 to 500, default 50) and cursor. A
// query refused as it stands is a *QueryError naming every bad parameter.
func (s *Service) Callbacks(ctx context.Context, orgID string, params url.Values) (CallbackPage, error) {
	cs, err := s.callbacks()
	if err != nil {
		return CallbackPage{}, err
	}
	var problems []string
	bad := func(name, what string) { problems = append(problems, name+": "+what) }
	for name := range params {
		if !slices.Contains(callbackParams, name) {
			bad(name, "is not a parameter of this endpoint; it takes "+fmt.Sprint(callbackParams))
		}
	}
	for _, name := range callbackParams {
		if len(params[name]) > 1 {
			bad(name, "is given more than once")
		}
	}
	f := store.CallbackFilter{Open: true}
	switch v := params.Get("state"); v {
	case "", "open":
	case "closed":
		f.Open = false
	default:
		bad("state", fmt.Sprintf("%q is not open or closed", v))
	}
	f.Location = params.Get("location")
	limit := 50
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxCallbackLimit {
			bad("limit", fmt.Sprintf("must be a whole number from 1 to %d", store.MaxCallbackLimit))
		}
		limit = n
	}
	scope := callbackScope(orgID, f)
	var after *store.CallbackPosition
	if v := params.Get("cursor"); v != "" {
		after, err = decodeCallbackCursor(v, scope)
		if err != nil {
			bad("cursor", err.Error())
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return CallbackPage{}, &QueryError{Problems: problems}
	}
	cbs, err := cs.ListCallbacks(ctx, orgID, f, after, limit+1)
	if err != nil {
		return CallbackPage{}, wrap("list callbacks", err)
	}
	p := CallbackPage{Items: make([]CallbackItem, 0, min(len(cbs), limit))}
	for i := range cbs {
		if i == limit {
			next := encodeCallbackCursor(cbs[i-1].Position(), scope)
			p.Next = &next
			break
		}
		p.Items = append(p.Items, NewCallbackItem(cbs[i]))
	}
	return p, nil
}

// Dismiss closes the organization's open item of number by hand at time at, naming the
// extension that closed it ("" for none), and returns the item as closed; ErrNoCallback when
// the number has no open item.
func (s *Service) Dismiss(ctx context.Context, orgID, number, extension string, at time.Time) (CallbackItem, error) {
	cs, err := s.callbacks()
	if err != nil {
		return CallbackItem{}, err
	}
	cb, err := cs.DismissCallback(ctx, orgID, number, at, extension)
	if errors.Is(err, store.ErrNotFound) {
		return CallbackItem{}, fmt.Errorf("history: dismiss %q: %w", number, ErrNoCallback)
	}
	if err != nil {
		return CallbackItem{}, wrap("dismiss a callback", err)
	}
	return NewCallbackItem(cb), nil
}

// callbackScope binds a cursor of the list to the organization and its filter.
func callbackScope(orgID string, f store.CallbackFilter) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "callwire callbacks cursor v1\x00%s\x00%t\x00%s", orgID, f.Open, f.Location)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// A callbacks cursor is base64url (unpadded) of: version 1 (one byte), the last item's
// LastMissedAt in Unix nanoseconds (eight bytes, big-endian), its number, then the first eight
// bytes of the SHA-256 of the scope and all that. Like the calls' cursor it grants nothing: the
// query stays confined to the key's organization.
const callbackCursorVersion = 1

// encodeCallbackCursor returns the cursor continuing after p under scope.
func encodeCallbackCursor(p store.CallbackPosition, scope [sha256.Size]byte) string {
	b := []byte{callbackCursorVersion}
	b = binary.BigEndian.AppendUint64(b, uint64(p.LastMissedAt.UnixNano()))
	b = append(b, p.Number...)
	sum := sha256.Sum256(append(scope[:], b...))
	return base64.RawURLEncoding.EncodeToString(append(b, sum[:8]...))
}

// decodeCallbackCursor reads a cursor made by encodeCallbackCursor under scope.
func decodeCallbackCursor(v string, scope [sha256.Size]byte) (*store.CallbackPosition, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) < 1+8+8 || b[0] != callbackCursorVersion {
		return nil, errors.New("is not a cursor this endpoint gave; start again without it")
	}
	body, check := b[:len(b)-8], b[len(b)-8:]
	sum := sha256.Sum256(append(scope[:], body...))
	if string(sum[:8]) != string(check) {
		return nil, errors.New("was changed, cut short, or given with other filters; start again without it")
	}
	return &store.CallbackPosition{
		LastMissedAt: time.Unix(0, int64(binary.BigEndian.Uint64(body[1:9]))).UTC(),
		Number:       string(body[9:]),
	}, nil
}
