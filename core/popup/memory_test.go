package popup_test

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
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
		if got := counter(t, reg, "callwire_broker_popups_total", outcome); got != n {
			t.Errorf("%s = %v, want %v", outcome, got, n)
		}
	}
	if got := counter(t, reg, "callwire_broker_subscriptions", ""); got != 1 {
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

// counter reads the metric name (with outcome label value, if any) from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := outcome == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					match = true
				}
			}
			if !match {
				continue
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return 0
}
