package history

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

func london(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseListQueryDates(t *testing.T) {
	loc := london(t)
	for _, tc := range []struct {
		query       string
		from, until string
	}{
		// Summer: BST, UTC+1.
		{"from=2026-07-02&until=2026-07-02", "2026-07-01T23:00:00Z", "2026-07-02T23:00:00Z"},
		// The day the clocks go back is 25 hours long.
		{"from=2026-10-25&until=2026-10-25", "2026-10-24T23:00:00Z", "2026-10-26T00:00:00Z"},
		// The day they go forward, 23.
		{"from=2026-03-29&until=2026-03-29", "2026-03-29T00:00:00Z", "2026-03-29T23:00:00Z"},
		{"from=2026-07-02T10:00:00%2B02:00", "2026-07-02T08:00:00Z", ""},
	} {
		q, _ := url.ParseQuery(tc.query)
		lq, problems := parseListQuery(q, "org", loc, "GB")
		if len(problems) > 0 {
			t.Fatalf("%s: %v", tc.query, problems)
		}
		if got := fmtTime(lq.filter.From); got != tc.from {
			t.Errorf("%s: from = %s, want %s", tc.query, got, tc.from)
		}
		if got := fmtTime(lq.filter.Until); got != tc.until {
			t.Errorf("%s: until = %s, want %s", tc.query, got, tc.until)
		}
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func TestParseNumber(t *testing.T) {
	for _, tc := range []struct {
		in, country string
		want        *store.NumberMatch
	}{
		{"+442071230100", "", &store.NumberMatch{Key: store.NumberKey("+442071230100")}},
		{" 442071230100", "", &store.NumberMatch{Key: store.NumberKey("+442071230100")}}, // an unescaped +
		{"020 7123 0100", "GB", &store.NumberMatch{Key: store.NumberKey("+442071230100")}},
		{"020 7123 0100", "", &store.NumberMatch{Key: store.NumberKey("02071230100"), Trailing: true}},
		{"0100", "GB", &store.NumberMatch{Key: "0010", Trailing: true}},
		{"(555) 010-0111", "US", &store.NumberMatch{Key: store.NumberKey("5550100111"), Trailing: true}},
		{"123", "GB", nil},
		{"+12", "", nil},
		{"abc", "", nil},
		{"", "", nil},
		{"1+234", "", nil},
	} {
		got, msg := parseNumber(tc.in, tc.country)
		switch {
		case tc.want == nil && msg == "":
			t.Errorf("parseNumber(%q, %q) = %+v, want a problem", tc.in, tc.country, got)
		case tc.want != nil && (got == nil || *got != *tc.want):
			t.Errorf("parseNumber(%q, %q) = %+v, %q; want %+v", tc.in, tc.country, got, msg, tc.want)
		}
	}
}

func TestCursor(t *testing.T) {
	q := url.Values{"direction": {"inbound"}}
	scope := cursorScope("org-1", q)
	p := store.CallPosition{StartedAt: time.Date(2026, 7, 1, 8, 0, 0, 123456789, time.UTC), No: 42}
	c := encodeCursor(p, scope)
	got, err := decodeCursor(c, scope)
	if err != nil || !got.StartedAt.Equal(p.StartedAt) || got.No != p.No {
		t.Fatalf("decodeCursor(encodeCursor(%+v)) = %+v, %v", p, got, err)
	}
	// Every one-character change is refused.
	for i := range c {
		b := []byte(c)
		b[i] = map[bool]byte{true: 'A', false: 'B'}[b[i] != 'A']
		if _, err := decodeCursor(string(b), scope); err == nil {
			t.Errorf("a cursor changed at %d is accepted", i)
		}
	}
	for name, other := range map[string][32]byte{
		"another organization": cursorScope("org-2", q),
		"another filter":       cursorScope("org-1", url.Values{"direction": {"outbound"}}),
	} {
		if _, err := decodeCursor(c, other); err == nil || !strings.Contains(err.Error(), "another") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// limit and the cursor itself are not part of the scope; the order of values is not either.
	if cursorScope("org-1", url.Values{"direction": {"inbound", "outbound"}, "limit": {"5"}}) !=
		cursorScope("org-1", url.Values{"direction": {"outbound", "inbound"}, "cursor": {"x"}}) {
		t.Error("the scope depends on limit, cursor or the order of values")
	}
}

func TestDefuse(t *testing.T) {
	for in, want := range map[string]string{
		"+442071230100": "+442071230100", "=HYPERLINK(1)": "'=HYPERLINK(1)", "-1+2": "'-1+2",
		"@x": "'@x", "Ada": "Ada", "": "", "-12.5": "-12.5", "+": "'+",
	} {
		if got := defuse(in); got != want {
			t.Errorf("defuse(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseListQuery: no query and no cursor may panic, and every cursor the parser accepts
// names a position it could have made.
func FuzzParseListQuery(f *testing.F) {
	scope := cursorScope("org", url.Values{})
	good := encodeCursor(store.CallPosition{StartedAt: time.Unix(1, 2), No: 3}, scope)
	for _, s := range []string{"", "from=2026-12-01&until=2026-12-02", "outcome=missed&outcome=x", "number=%2B442071230100",
		"number=020+7123", "limit=500", "cursor=" + good, "cursor=%%", "recorded=false", "direction=inbound&direction=inbound"} {
		f.Add(s)
	}
	loc := london(f)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		lq, problems := parseListQuery(q, "org", loc, "GB")
		if len(problems) == 0 {
			if err := lq.filter.Validate(); err != nil {
				t.Errorf("%q: accepted a filter the store refuses: %v", raw, err)
			}
			if lq.limit < 1 || lq.limit > maxListLimit {
				t.Errorf("%q: limit %d", raw, lq.limit)
			}
		}
		if p, err := decodeCursor(raw, scope); err == nil && encodeCursor(*p, scope) != raw {
			t.Errorf("cursor %q accepted but not one encodeCursor makes", raw)
		}
	})
}
