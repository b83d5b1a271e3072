package numbering

import (
	"slices"
	"testing"

	"github.com/callwire/callwire/sdk/event"
)

func TestNewKeepsNoReferenceToConfig(t *testing.T) {
	cfg := Config{
		Numbers:        []string{"+15551230100"},
		DefaultCountry: "us",
		Locations:      map[string][]string{"+15551230100": {"main"}},
	}
	p := mustPlan(t, cfg)
	cfg.Numbers[0] = "+15551230999"
	cfg.Locations["+15551230100"][0] = "changed"
	if !p.IsClinic("+15551230100") || p.IsClinic("+15551230999") {
		t.Errorf("plan follows the config's numbers after New")
	}
	if got := p.Locations("+15551230100"); !slices.Equal(got, []string{"main"}) {
		t.Errorf("Locations = %v, want [main]", got)
	}
	if p.DefaultCountry() != "US" {
		t.Errorf("DefaultCountry = %q, want US", p.DefaultCountry())
	}
}

func TestIsClinicAndLocations(t *testing.T) {
	p := usPlan(t)
	for _, c := range []struct {
		number string
		clinic bool
		locs   []string
	}{
		{"+15551230100", true, []string{"main"}},
		{"+15551230200", true, []string{"branch-east"}},
		{"+12125550123", false, nil},
		{"5551230100", false, nil}, // not E.164: classify first
		{"", false, nil},
	} {
		if got := p.IsClinic(c.number); got != c.clinic {
			t.Errorf("IsClinic(%q) = %v", c.number, got)
		}
		if got := p.Locations(c.number); !slices.Equal(got, c.locs) || (c.locs == nil) != (got == nil) {
			t.Errorf("Locations(%q) = %#v, want %#v", c.number, got, c.locs)
		}
	}
	// Appending to the result must not write into the plan.
	l := p.Locations("+15551230100")
	_ = append(l, "x")
	if got := p.Locations("+15551230100"); !slices.Equal(got, []string{"main"}) {
		t.Errorf("append wrote through: %v", got)
	}
	if got := p.Numbers(); !slices.Equal(got, []string{"+15551230100", "+15551230200"}) {
		t.Errorf("Numbers = %v", got)
	}
}

func TestDirection(t *testing.T) {
	p := usPlan(t)
	clinic, other := e164("+15551230100"), e164("+12125550123")
	for _, c := range []struct {
		name     string
		from, to event.Party
		want     event.Direction
		ok       bool
	}{
		{"caller to clinic number", other, clinic, event.Inbound, true},
		{"caller to extension", other, ext("101"), event.Inbound, true},
		{"anonymous to clinic", anonymous(""), clinic, event.Inbound, true},
		{"extension to caller", ext("101"), other, event.Outbound, true},
		{"clinic number to caller", clinic, other, event.Outbound, true},
		{"extension to anonymous", ext("101"), anonymous(""), event.Outbound, true},
		{"extension to extension", ext("101"), ext("102"), event.Internal, true},
		{"extension to clinic number", ext("101"), clinic, event.Internal, true},
		{"outside to outside", other, e164("+442071234567"), "", false},
		{"unknown to extension", unknown("sip:alice@pbx"), ext("101"), "", false},
		{"extension to unknown", ext("101"), unknown("911"), "", false},
		{"default kind with a number", event.Party{Number: "+12125550123"}, clinic, event.Inbound, true},
		{"e164 without a number", event.Party{Kind: event.KindE164}, clinic, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, ok := p.Direction(c.from, c.to)
			if d != c.want || ok != c.ok {
				t.Fatalf("Direction = %q, %v; want %q, %v", d, ok, c.want, c.ok)
			}
		})
	}
}

// TestCacheBounded: the cache never holds more than its bound, however many distinct inputs.
func TestCacheBounded(t *testing.T) {
	p := usPlan(t)
	for i := range cacheEntries + 500 {
		p.Classify("sip:user"+itoa(i)+"@pbx.example", "")
	}
	if n := p.cache.Len(); n > cacheEntries {
		t.Fatalf("cache holds %d entries, bound %d", n, cacheEntries)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for ; i > 0; i /= 10 {
		n--
		b[n] = byte('0' + i%10)
	}
	return string(b[n:])
}

// TestConcurrentClassify: a Plan is shared by a translator's goroutines (run with -race).
func TestConcurrentClassify(t *testing.T) {
	p := usPlan(t)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				text := "+1212555" + pad4(i%50)
				if got := p.Classify(text, ""); got.Kind != event.KindE164 && got.Kind != event.KindUnknown {
					t.Errorf("goroutine %d: %q gave %#v", g, text, got)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func TestLocationsNumbersAreClinicNumbers(t *testing.T) {
	p, err := New(Config{DefaultCountry: "US", Numbers: []string{"+15551230100"},
		Locations: map[string][]string{"+15551230200": {"branch-east"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsClinic("+15551230200") || !p.IsClinic("+15551230100") {
		t.Error("a number given only in locations is not the clinic's")
	}
	if got := p.Locations("+15551230200"); len(got) != 1 || got[0] != "branch-east" {
		t.Errorf("Locations = %q", got)
	}
}
