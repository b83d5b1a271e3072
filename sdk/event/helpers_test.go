package event

import (
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// A call block and envelope that are valid on their own, for building bodies in tests.
const (
	okCall = `{"direction":"inbound","from":{"number":"+442071234567"}}`
	okAt   = `2026-03-01T09:30:00Z`
)

// evt returns a valid event of type typ with the given extra members (a JSON fragment such as
// `"sequence":1`) appended.
func evt(typ, extra string) string {
	s := `{"type":"` + typ + `","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

// ev is evt for call_received.
func ev(extra string) string { return evt("call_received", extra) }

// withCall returns a valid call_received event with the given call block and extra members.
func withCall(call, extra string) string {
	s := `{"type":"call_received","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + call
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

// batch wraps event objects in {"events": [...]}.
func batch(events ...string) string {
	return `{"events":[` + strings.Join(events, ",") + `]}`
}

// repeat returns n copies of s joined by sep.
func repeat(s string, n int, sep string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = s
	}
	return strings.Join(parts, sep)
}

// quoted returns n copies of the JSON string s as array elements.
func quoted(s string, n int) string { return repeat(`"`+s+`"`, n, ",") }

// requireProblems asserts that err is a *ValidationError whose problems name exactly the fields
// in want, each written "field|word": the multiset of fields must match, and for each entry some
// problem on that field must contain word (case-insensitive). An empty want means err is nil.
func requireProblems(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("want no problems, got %v", err)
		}
		return
	}
	ve, ok := AsValidationError(err)
	if !ok {
		t.Fatalf("want a *ValidationError naming %v, got %v", want, err)
	}
	var gotFields, wantFields []string
	for _, p := range ve.Problems {
		gotFields = append(gotFields, p.Field)
		if p.Field == "" || p.Message == "" {
			t.Errorf("problem with an empty part: %+v", p)
		}
	}
	for _, w := range want {
		f, _, _ := strings.Cut(w, "|")
		wantFields = append(wantFields, f)
	}
	slices.Sort(gotFields)
	slices.Sort(wantFields)
	if !slices.Equal(gotFields, wantFields) {
		t.Fatalf("problem fields:\n got  %q\n want %q\nerror: %v", gotFields, wantFields, err)
	}
	for _, w := range want {
		f, word, _ := strings.Cut(w, "|")
		found := false
		for _, p := range ve.Problems {
			if p.Field == f && strings.Contains(strings.ToLower(p.Message), strings.ToLower(word)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no problem on %s mentions %q; error: %v", f, word, err)
		}
	}
}

// within reports whether inner lies inside outer's memory (a subslice, not a copy), and where.
func within(outer, inner []byte) (int, bool) {
	if len(inner) == 0 || len(outer) == 0 {
		return 0, false
	}
	o := uintptr(unsafe.Pointer(unsafe.SliceData(outer)))
	i := uintptr(unsafe.Pointer(unsafe.SliceData(inner)))
	if i < o || i+uintptr(len(inner)) > o+uintptr(len(outer)) {
		return 0, false
	}
	return int(i - o), true
}
