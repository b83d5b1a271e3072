package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/internal/ssetest"
)

// ringingFunc is an httpapi.RingingPopups.
type ringingFunc func(ctx context.Context, orgID string, locations []string) ([]popup.Popup, error)

func (f ringingFunc) RingingPopups(ctx context.Context, orgID string, locations []string) ([]popup.Popup, error) {
	return f(ctx, orgID, locations)
}

// TestStreamReplaysRingingCalls: a stream sends the popups of the calls ringing now before the
// live ones, oldest first, and only its organization's; a live popup that was replayed is not
// sent again (the stream subscribed before it read); a read that fails costs the replay only.
func TestStreamReplaysRingingCalls(t *testing.T) {
	ringing := func(org, id string) popup.Popup {
		return popup.Popup{ID: id, OrgID: org, CallID: "call-" + id, Provider: "sip", ProviderCallID: id,
			Locations: []string{"front"}, Direction: "inbound", Clients: []popup.Client{}, Lookup: popup.LookupUnknown}
	}
	for _, tc := range []struct {
		name string
		// read answers the stream's read; e publishes live popups meanwhile.
		read func(e **streamEnv) ringingFunc
		want []string
	}{
		{"oldest first, own organization only", func(**streamEnv) ringingFunc {
			return func(_ context.Context, org string, _ []string) ([]popup.Popup, error) {
				return []popup.Popup{ringing(org, "newer"), ringing("org_hillside", "theirs"), ringing(org, "older")}, nil
			}
		}, []string{"older", "newer", "live"}},
		{"a popup published during the read comes once", func(e **streamEnv) ringingFunc {
			return func(_ context.Context, org string, _ []string) ([]popup.Popup, error) {
				(*e).publish(org, "racing", "front")
				return []popup.Popup{ringing(org, "racing")}, nil
			}
		}, []string{"racing", "live"}},
		{"a failed read", func(**streamEnv) ringingFunc {
			return func(context.Context, string, []string) ([]popup.Popup, error) {
				return nil, errors.New("store down")
			}
		}, []string{"live"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *streamEnv
			e = newStreamEnv(t, func(o *httpapi.Options) { o.Ringing = tc.read(&e) })
			c := e.open(secretDesk, "?locations=front")
			if ev := c.next(t, 5*time.Second, false); ev.Event != "ready" {
				t.Fatalf("first event %+v, want ready", ev)
			}
			var got []string
			for range len(tc.want) - 1 {
				got = append(got, popupOf(t, c.next(t, 5*time.Second, false)).ProviderCallID)
			}
			e.publish("org_riverside", "live", "front")
			got = append(got, popupOf(t, c.next(t, 5*time.Second, false)).ProviderCallID)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// popupOf returns ev's popup, failing unless ev is a popup whose id line is its id.
func popupOf(t *testing.T, ev ssetest.Event) popup.Popup {
	t.Helper()
	var p popup.Popup
	if ev.Event != "popup" || json.Unmarshal([]byte(ev.Data), &p) != nil || ev.ID != p.ID {
		t.Fatalf("event %+v, want a popup", ev)
	}
	return p
}
