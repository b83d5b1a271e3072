package popup_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/internal/metrictest"
	"github.com/callwire/callwire/internal/testclock"
)

func TestMemoryContract(t *testing.T) {
	popuptest.Run(t, func(t *testing.T) popup.Broker {
		return popup.NewMemory(popup.MemoryOptions{})
	})
}

func TestMemoryDropsForASlowSubscriberAndCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := popup.NewMemory(popup.MemoryOptions{Buffer: 2, Registerer: reg})
	defer m.Close()
	// A second broker on the same registry shares the metrics rather than panicking.
	popup.NewMemory(popup.MemoryOptions{Registerer: reg}).Close()
	org := popuptest.OrgID(t)
	slow, err := m.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	for i := range 5 {
		if err := m.Publish(t.Context(), popuptest.Sample(org, strconv.Itoa(i), "main")); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"0", "1"} {
		if p := popuptest.Receive(t, slow); p.ID != want {
			t.Fatalf("got %s, want %s", p.ID, want)
		}
	}
	want := map[string]float64{"published": 5, "delivered": 2, "dropped": 3, "failed": 0}
	for outcome, n := range want {
		if got := metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", outcome); got != n {
			t.Errorf("%s = %v, want %v", outcome, got, n)
		}
	}
	if got := metrictest.Sum(t, reg, "callwire_broker_subscriptions"); got != 1 {
		t.Errorf("subscriptions = %v, want 1", got)
	}
}

func TestMemoryPublishedPopupIsACopy(t *testing.T) {
	m := popup.NewMemory(popup.MemoryOptions{})
	defer m.Close()
	org := popuptest.OrgID(t)
	s, err := m.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := popuptest.Sample(org, "copy", "main")
	if err := m.Publish(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	p.Locations[0], p.From.Number, p.Clients[0].Name = "changed", "changed", "changed"
	got := popuptest.Receive(t, s)
	if got.Locations[0] != "main" || got.From.Number != "+442071234567" || got.Clients[0].Name != "Ada Lovelace" {
		t.Errorf("the publisher's later changes reached the subscriber: %+v", got)
	}
}

func TestMemoryClaims(t *testing.T) {
	// Each step publishes the popup id after moving the clock by wait, and expects it
	// published (nil) or a repeat.
	type step struct {
		wait time.Duration
		id   string
		want error
	}
	tests := []struct {
		name  string
		opts  popup.MemoryOptions
		steps []step
	}{
		{"held for the default TTL", popup.MemoryOptions{}, []step{
			{0, "a", nil},
			{popup.DefaultClaimTTL - time.Second, "a", popup.ErrRepeat},
			{time.Second, "a", nil}, // expired: the ringing may be published again, and is claimed anew
			{time.Second, "a", popup.ErrRepeat},
		}},
		{"held for the given TTL", popup.MemoryOptions{ClaimTTL: time.Minute}, []step{
			{0, "a", nil},
			{30 * time.Second, "b", nil},
			{29 * time.Second, "a", popup.ErrRepeat},
			{time.Second, "a", nil},
			{0, "b", popup.ErrRepeat},
			{30 * time.Second, "b", nil},
		}},
		{"bounded: the oldest claim goes first", popup.MemoryOptions{MaxClaims: 3}, []step{
			{0, "a", nil},
			{time.Second, "b", nil},
			{time.Second, "c", nil},
			{time.Second, "d", nil}, // a is forgotten early
			{0, "a", nil},           // claimed anew; b is forgotten
			{0, "c", popup.ErrRepeat},
			{0, "d", popup.ErrRepeat},
			{0, "b", nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testclock.New(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
			reg := prometheus.NewRegistry()
			tt.opts.Registerer = reg
			m := popup.NewMemoryAt(tt.opts, clk.Now)
			defer m.Close()
			org := popuptest.OrgID(t)
			s, err := m.Subscribe(t.Context(), org, []string{"main"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			published, repeats := 0, 0
			for i, st := range tt.steps {
				clk.Advance(st.wait)
				err := m.Publish(t.Context(), popuptest.Sample(org, st.id, "main"))
				if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
					t.Fatalf("step %d: publish %s: %v, want %v", i, st.id, err, st.want)
				}
				if err == nil {
					published++
					if p := popuptest.Receive(t, s); p.ID != st.id {
						t.Fatalf("step %d: received %s, want %s", i, p.ID, st.id)
					}
				} else {
					repeats++
				}
			}
			for outcome, n := range map[string]int{"published": published, "repeat": repeats, "failed": 0} {
				if got := metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", outcome); got != float64(n) {
					t.Errorf("%s = %v, want %d", outcome, got, n)
				}
			}
		})
	}
}

// TestMemoryClaimsStayBounded publishes many more ringings than the claim set holds, across
// the claim TTL, and checks that the broker still answers repeats of the newest.
func TestMemoryClaimsStayBounded(t *testing.T) {
	clk := testclock.New(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
	m := popup.NewMemoryAt(popup.MemoryOptions{MaxClaims: 100, ClaimTTL: time.Minute}, clk.Now)
	defer m.Close()
	org := popuptest.OrgID(t)
	for i := range 10_000 {
		clk.Advance(time.Second)
		if err := m.Publish(t.Context(), popuptest.Sample(org, strconv.Itoa(i), "main")); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if err := m.Publish(t.Context(), popuptest.Sample(org, strconv.Itoa(i), "main")); !errors.Is(err, popup.ErrRepeat) {
			t.Fatalf("repeat of %d: %v, want ErrRepeat", i, err)
		}
		// Claims older than the TTL have gone, and never more than the bound are held.
		if held, indexed := m.ClaimsHeld(); held > 60 || indexed != held {
			t.Fatalf("after %d ringings: %d claims held, %d indexed", i+1, held, indexed)
		}
	}
	// Past the bound, the oldest go first.
	big := popup.NewMemoryAt(popup.MemoryOptions{MaxClaims: 100}, clk.Now)
	defer big.Close()
	for i := range 10_000 {
		if err := big.Publish(t.Context(), popuptest.Sample(org, strconv.Itoa(i), "main")); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if held, indexed := big.ClaimsHeld(); held > 100 || indexed != held {
			t.Fatalf("after %d ringings: %d claims held, %d indexed", i+1, held, indexed)
		}
	}
}
