package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// RingingReader is the part of the store a Replay reads (store.Store satisfies it).
type RingingReader interface {
	RingingCalls(ctx context.Context, orgID string, locations []string, since time.Time, limit int) ([]store.Call, error)
}

// Replay rebuilds, from the store, the popups of the calls that ring now: what a popup stream
// sends a desk as it connects, so that a desk that was away while a call started ringing still
// shows it. The broker delivers a popup at most once, to the desks subscribed as it is
// published; the store keeps every ringing call until it is answered or ends.
type Replay struct {
	reader RingingReader
	window time.Duration
	limit  int
	now    func() time.Time
}

// Default bounds of a Replay.
const (
	// DefaultReplayWindow is how long ago a call may have started and still be replayed: a
	// call rings for seconds, rarely past a minute or two, and a call whose end was never
	// reported must not light desks for ever.
	DefaultReplayWindow = 2 * time.Minute
	// DefaultReplayLimit is the most popups one replay sends.
	DefaultReplayLimit = 50
)

// NewReplay returns a Replay reading r: calls started within window before now (0 means
// DefaultReplayWindow), at most limit of them (0 means DefaultReplayLimit, at most
// store.MaxRingingLimit). now nil means time.Now.
func NewReplay(r RingingReader, window time.Duration, limit int, now func() time.Time) (*Replay, error) {
	if r == nil {
		return nil, errors.New("ingest: replay: a reader is required")
	}
	if window < 0 || limit < 0 || limit > store.MaxRingingLimit {
		return nil, fmt.Errorf("ingest: replay: window %v must not be negative and limit %d must be 0 to %d", window, limit, store.MaxRingingLimit)
	}
	if window == 0 {
		window = DefaultReplayWindow
	}
	if limit == 0 {
		limit = DefaultReplayLimit
	}
	if now == nil {
		now = time.Now
	}
	return &Replay{reader: r, window: window, limit: limit, now: now}, nil
}

// RingingPopups returns the popups of orgID's calls that ring now in one of locations and
// started within the replay window, newest first, each as RingingPopup builds it. Errors wrap
// ErrUnavailable when the store fails transiently.
func (r *Replay) RingingPopups(ctx context.Context, orgID string, locations []string) ([]popup.Popup, error) {
	now := r.now().UTC()
	calls, err := r.reader.RingingCalls(ctx, orgID, locations, now.Add(-r.window), r.limit)
	if err != nil {
		if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("ingest: replay: %w", err)
	}
	out := make([]popup.Popup, 0, len(calls))
	for i := range calls {
		p, err := RingingPopup(&calls[i], now)
		if err != nil {
			// A row this version cannot read costs its popup, not the others'.
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// RingingPopup rebuilds the popup of a stored call, published at publishedAt: the ID, call and
// locations the pipeline gave it when it rang (PopupID of the call's key), the parties, trunk
// and direction of the call's block as stored, the client matches on file, and OccurredAt the
// call's start as ordered (the reporter's time, clamped to the server's clock). It has no
// TraceID. Its Lookup is matched when matches are on file, no_match or skipped when the lookup
// found none (skipped for a caller with no E.164 number), and popup.LookupUnknown when no
// matches are on file (the lookup failed, or the organization had none).
func RingingPopup(c *store.Call, publishedAt time.Time) (popup.Popup, error) {
	var block event.Call
	if len(c.Block) > 0 {
		if err := json.Unmarshal(c.Block, &block); err != nil {
			return popup.Popup{}, fmt.Errorf("ingest: call %s: block: %w", c.ID, err)
		}
	}
	var locs []string
	if len(c.Summary.Locations) > 0 {
		if err := json.Unmarshal(c.Summary.Locations, &locs); err != nil {
			return popup.Popup{}, fmt.Errorf("ingest: call %s: locations: %w", c.ID, err)
		}
	}
	if len(locs) == 0 {
		locs = []string{event.DefaultLocation}
	}
	clients := []popup.Client{}
	outcome := popup.LookupUnknown
	if c.Clients != nil {
		if err := json.Unmarshal(c.Clients, &clients); err != nil {
			return popup.Popup{}, fmt.Errorf("ingest: call %s: clients: %w", c.ID, err)
		}
		if clients == nil {
			clients = []popup.Client{}
		}
		switch {
		case len(clients) > 0:
			outcome = popup.LookupMatched
		case block.From == nil || block.From.EffectiveKind() != event.KindE164 || block.From.Number == "":
			outcome = popup.LookupSkipped
		default:
			outcome = popup.LookupNoMatch
		}
	}
	dir := string(block.Direction)
	if dir == "" {
		dir = c.Direction
	}
	return popup.Popup{
		ID:             PopupID(c.OrgID, c.Provider, c.ProviderCallID),
		OrgID:          c.OrgID,
		CallID:         c.ID,
		Provider:       c.Provider,
		ProviderCallID: c.ProviderCallID,
		Locations:      popup.UniqueLocations(locs),
		Direction:      dir,
		From:           block.From,
		To:             block.To,
		Trunk:          block.Trunk,
		Clients:        clients,
		Lookup:         outcome,
		OccurredAt:     c.FirstAt,
		PublishedAt:    publishedAt,
	}, nil
}
