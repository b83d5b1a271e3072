package main

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

const sampleExposition = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 2012
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 3.3554432e+07
# TYPE go_memstats_stack_inuse_bytes gauge
go_memstats_stack_inuse_bytes 8.388608e+06
# TYPE go_memstats_sys_bytes gauge
go_memstats_sys_bytes 6.7108864e+07
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 7.340032e+07
# TYPE process_open_fds gauge
process_open_fds 1027
# TYPE callwire_popup_streams_open gauge
callwire_popup_streams_open 1000
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.0001
go_gc_duration_seconds_sum 0.01
go_gc_duration_seconds_count 12
`

func TestParseGauges(t *testing.T) {
	g, err := parseGauges([]byte(sampleExposition))
	if err != nil {
		t.Fatal(err)
	}
	want := serverGauges{Goroutines: 2012, HeapAlloc: 32 << 20, StackInuse: 8 << 20, Sys: 64 << 20, RSS: 70 << 20, OpenFDs: 1027, Streams: 1000}
	if g != want {
		t.Fatalf("got %+v, want %+v", g, want)
	}
	missing := strings.Replace(sampleExposition, "process_open_fds 1027\n", "", 1)
	if _, err := parseGauges([]byte(missing)); err == nil || !strings.Contains(err.Error(), "process_open_fds") {
		t.Fatalf("a missing gauge: got %v, want an error naming it", err)
	}
	if _, err := parseGauges([]byte("go_goroutines{")); err == nil {
		t.Fatal("a broken exposition parsed")
	}
}

func TestSettled(t *testing.T) {
	if _, err := settled(nil); err == nil {
		t.Fatal("no samples: want an error")
	}
	got, err := settled([]serverGauges{{HeapAlloc: 50, RSS: 1, Goroutines: 10}, {HeapAlloc: 30, RSS: 2, Goroutines: 11}, {HeapAlloc: 40, RSS: 3, Goroutines: 12}})
	if err != nil {
		t.Fatal(err)
	}
	if got.HeapAlloc != 30 || got.RSS != 3 || got.Goroutines != 12 {
		t.Fatalf("got %+v: want the least heap and the last of the rest", got)
	}
}

func TestSlopes(t *testing.T) {
	lv := func(n int, rss, heap, gor, fds, redis, cores float64) streamLevel {
		return streamLevel{Streams: n, Server: serverGauges{RSS: rss, HeapAlloc: heap, Goroutines: gor, OpenFDs: fds}, RedisRSS: redis, ServerCores: cores}
	}
	// Out of order on purpose, and a repeated level that has no slope.
	got := slopes([]streamLevel{
		lv(5000, 500e6, 300e6, 10012, 5030, 60e6, 0.5),
		lv(0, 20e6, 4e6, 12, 30, 1e6, 0.01),
		lv(1000, 120e6, 64e6, 2012, 1030, 13e6, 0.11),
		lv(1000, 120e6, 64e6, 2012, 1030, 13e6, 0.11),
	})
	if len(got) != 2 {
		t.Fatalf("got %d slopes, want 2: %+v", len(got), got)
	}
	a, b := got[0], got[1]
	if a.Span != "0→1000" || a.RSSBytes != 100e3 || a.HeapBytes != 60e3 || a.Goroutines != 2 || a.FDs != 1 || a.RedisRSSBytes != 12e3 {
		t.Fatalf("first slope %+v", a)
	}
	if b.Span != "1000→5000" || b.RSSBytes != 95e3 || b.Goroutines != 2 || b.FDs != 1 {
		t.Fatalf("second slope %+v", b)
	}
	if d := b.ServerCoresPer1k - 0.0975; d > 1e-9 || d < -1e-9 {
		t.Fatalf("cores per 1000 streams %v, want 0.0975", b.ServerCoresPer1k)
	}
}

func TestParseLevels(t *testing.T) {
	got, err := parseLevels(" 1000, 5000,10000", 1_000_000)
	if err != nil || len(got) != 3 || got[0] != 1000 || got[2] != 10000 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "5,5", "10,5", "x", "2000000", "1,,2"} {
		if _, err := parseLevels(bad, 1_000_000); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPerEvent(t *testing.T) {
	if got := perEvent(2, 10_000); got != 200 {
		t.Fatalf("perEvent 2s over 10000 events = %v µs, want 200", got)
	}
	if perEvent(1, 0) != 0 || eventsPerCore(0) != 0 {
		t.Fatal("no events or no cost must read 0")
	}
	if got := eventsPerCore(200); got != 5000 {
		t.Fatalf("eventsPerCore(200µs) = %v, want 5000", got)
	}
}

func TestDeskPlace(t *testing.T) {
	seen := map[[2]int]int{}
	for i := range 800 {
		o, l := deskPlace(i, 100)
		seen[[2]int{o, l}]++
	}
	if len(seen) != 100*len(scaleLocations) {
		t.Fatalf("800 desks over 100 organizations took %d places, want %d", len(seen), 100*len(scaleLocations))
	}
	for k, n := range seen {
		if n != 2 {
			t.Fatalf("place %v has %d desks, want 2", k, n)
		}
	}
}

func TestStreamBodyAndSSE(t *testing.T) {
	chunk := func(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }
	events := "retry: 3000\n\nevent: ready\ndata: {\"locations\":[\"lab\"]}\n\n: heartbeat\n\n" +
		"id: p1\nevent: popup\ndata: {\"id\":\"p1\",\"providerCallId\":\"call-1\"}\n\n"
	resp := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		chunk(events[:20]) + chunk(events[20:]) + "0\r\n\r\n"
	body, err := streamBody(bufio.NewReader(strings.NewReader(resp)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := readSSE(body, func(name string, data []byte) { got = append(got, name+"|"+string(data)) }); err != nil {
		t.Fatal(err)
	}
	// The retry field alone and the comment are no events.
	want := []string{"ready|{\"locations\":[\"lab\"]}", "popup|{\"id\":\"p1\",\"providerCallId\":\"call-1\"}"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("events %q, want %q", got, want)
	}
	if providerCallID([]byte(strings.Split(got[1], "|")[1])) != "call-1" {
		t.Fatal("providerCallId not found in the popup's data")
	}

	_, err = streamBody(bufio.NewReader(strings.NewReader("HTTP/1.1 401 Unauthorized\r\nContent-Length: 12\r\n\r\n{\"error\":1}\n")))
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("a 401: got %v", err)
	}
	if _, err := streamBody(bufio.NewReader(strings.NewReader("garbage\r\n\r\n"))); err == nil {
		t.Fatal("not an HTTP response: want an error")
	}
	if _, err := streamBody(bufio.NewReader(io.LimitReader(strings.NewReader("HTTP/1.1 200 OK\r\nX: y"), 20))); err == nil {
		t.Fatal("a cut head: want an error")
	}
}

func TestDeliveries(t *testing.T) {
	d := newDeliveries()
	t0 := time.Now()
	d.posted("a", t0)
	d.posted("b", t0)
	d.sink(1, "a", t0.Add(5*time.Millisecond))
	d.sink(2, "a", t0.Add(7*time.Millisecond))
	d.sink(2, "a", t0.Add(9*time.Millisecond)) // a repeat
	d.sink(3, "b", t0.Add(3*time.Millisecond))
	d.sink(3, "z", t0) // never posted: not timed
	ds, missing, dups := d.latencies(func(id string) int { return map[string]int{"a": 2, "b": 3}[id] })
	if len(ds) != 3 || missing != 2 || dups != 1 {
		t.Fatalf("got %d latencies, %d missing, %d repeats; want 3, 2, 1", len(ds), missing, dups)
	}
}

func TestWithApplicationName(t *testing.T) {
	got, err := withApplicationName("postgres://u@127.0.0.1:5432/test?sslmode=disable&search_path=s1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "application_name=s1") || !strings.Contains(got, "search_path=s1") || !strings.Contains(got, "sslmode=disable") {
		t.Fatalf("got %s", got)
	}
	if _, err := withApplicationName("postgres://u@[::1", "x"); err == nil {
		t.Fatal("a broken URL: want an error")
	}
}

func TestCPUGrowth(t *testing.T) {
	before := map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: time.Second}
	after := map[int]time.Duration{1: 3 * time.Second, 2: 2 * time.Second, 4: 500 * time.Millisecond}
	// pid 1 grew 2s, pid 2 nothing, pid 3 ended (lost), pid 4 is new (all of it counts).
	if got := cpuGrowth(before, after); got != 2500*time.Millisecond {
		t.Fatalf("got %v, want 2.5s", got)
	}
}
