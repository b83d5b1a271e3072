package ringcentral

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/filelock"
)

// core stands for the core's store of one clinic's events, as the ingestion spec describes it:
// an event is kept once per call and dedupe key (its providerEventId); one sent again is a
// duplicate and stores nothing. before, when set, is called with each event before it is taken;
// an error from it is the agent not taking the event.
type core struct {
	t      *testing.T
	before func(event.Event) error

	mu     sync.Mutex
	stored []string
	dups   int
}

// key is what the core files an event under.
func key(e event.Event) string { return e.ProviderCallID + "/" + e.DedupeKey() }

func (c *core) emit(_ context.Context, e event.Event) error {
	if err := e.Validate(); err != nil {
		c.t.Errorf("invalid %s: %v", e.Type, err)
	}
	if c.before != nil {
		if err := c.before(e); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.stored, key(e)) {
		c.dups++
		return nil
	}
	c.stored = append(c.stored, key(e))
	return nil
}

// has reports whether the core holds every key in keys.
func (c *core) has(keys []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if !slices.Contains(c.stored, k) {
			return false
		}
	}
	return true
}

func (c *core) result() (stored []string, dups int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := slices.Clone(c.stored)
	slices.Sort(s)
	return s, c.dups
}

// checkCursorBacked fails the test unless every record f serves that was last modified at or
// before the saved cursor has all its events in the core: a cursor saved ahead of what the core
// holds would lose those events to a crash.
func checkCursorBacked(t *testing.T, f *fakeRC, path string, c *core) {
	t.Helper()
	cur, ok, err := loadCursor(path)
	if err != nil {
		t.Errorf("cursor: %v", err)
		return
	}
	if !ok {
		return
	}
	f.mu.Lock()
	pages := slices.Clone(f.pages)
	f.mu.Unlock()
	keysOf := &poller{calls: newCalls(testPlan(t), DefaultProvider, time.Hour), ended: &endedSet{m: map[string]time.Time{}}}
	for _, page := range pages {
		for _, r := range page {
			mod, _ := time.Parse(time.RFC3339Nano, r.LastModifiedTime)
			if mod.After(cur.Modified) {
				continue
			}
			var keys []string
			for _, e := range keysOf.events(r) {
				keys = append(keys, key(e))
			}
			if !c.has(keys) {
				t.Errorf("the cursor (%s) covers %s (modified %s) before the core holds its events %v", cur.Modified.Format(time.TimeOnly), r.ID, mod.Format(time.TimeOnly), keys)
			}
		}
	}
}

func cursorAt(t *testing.T, path string) time.Time {
	t.Helper()
	c, ok, err := loadCursor(path)
	if err != nil || !ok {
		t.Fatalf("cursor: %v, %v", ok, err)
	}
	return c.Modified
}

// TestPollWindowsOverlap polls twice with windows that overlap: the second poll reads again
// (from the cursor less poll_overlap) the records the first one handed over, with a new one.
// The core stores each event once, the cursor is never saved ahead of the events it covers, and
// after the second poll it is at the newest record.
func TestPollWindowsOverlap(t *testing.T) {
	t0 := time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)
	a := recorded(logRecord("s-A", "Inbound", "Accepted", t0, 45, t0.Add(70*time.Second)), "R-A")
	aLate := logRecord("s-A", "Inbound", "Accepted", t0, 45, t0.Add(70*time.Second)) // before its recording was ready
	aDone := recorded(logRecord("s-A", "Inbound", "Accepted", t0, 45, t0.Add(210*time.Second)), "R-A")
	b := logRecord("s-B", "Inbound", "Missed", t0, 20, t0.Add(40*time.Second))
	c := logRecord("s-C", "Outbound", "Call connected", t0.Add(2*time.Minute), 30, t0.Add(3*time.Minute))
	all := []string{"s-A/rc-ended", "s-A/rc-recording-R-A", "s-B/rc-ended", "s-B/rc-missed", "s-C/rc-ended"}
	tests := []struct {
		name          string
		first, second [][]callLogRecord
		restart       bool   // the second poll is by a new run of the translator
		refuse        string // the key the agent refuses once in the second poll
		dups          int
		cursor        time.Time
	}{
		{name: "the same run polls again", first: [][]callLogRecord{{a, b}}, second: [][]callLogRecord{{a, b}, {c}},
			dups: 1 /* the recording: the run remembers only the ends it sent */, cursor: t0.Add(3 * time.Minute)},
		{name: "a restarted run polls again", first: [][]callLogRecord{{a, b}}, second: [][]callLogRecord{{a, b}, {c}}, restart: true,
			dups: 4, cursor: t0.Add(3 * time.Minute)},
		{name: "a recording completes between the polls", first: [][]callLogRecord{{aLate, b}}, second: [][]callLogRecord{{b}, {aDone, c}},
			cursor: t0.Add(210 * time.Second)},
		{name: "the agent refuses an event of the second poll", first: [][]callLogRecord{{a, b}}, second: [][]callLogRecord{{a, b}, {c}},
			refuse: "s-C/rc-ended", dups: 2, cursor: t0.Add(3 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRC(t)
			dir := t.TempDir()
			cr := &core{t: t}
			var mu sync.Mutex
			now := t0.Add(2 * time.Minute)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			first := newTestPoller(t, f, dir, cr.emit, clock, noSleep)
			refuse := tt.refuse
			cr.before = func(e event.Event) error {
				checkCursorBacked(t, f, first.path, cr)
				if key(e) == refuse {
					refuse = ""
					return errors.New("outbox full")
				}
				return nil
			}

			f.setPages(tt.first...)
			if _, err := first.pollOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			firstCursor := cursorAt(t, first.path)
			checkCursorBacked(t, f, first.path, cr)

			mu.Lock()
			now = t0.Add(6 * time.Minute)
			mu.Unlock()
			f.setPages(tt.second...)
			second := first
			if tt.restart {
				second = newTestPoller(t, f, dir, cr.emit, clock, noSleep)
			}
			n, err := second.pollOnce(t.Context())
			if tt.refuse != "" {
				if err == nil {
					t.Fatal("a refused event did not fail the poll")
				}
				if got := cursorAt(t, first.path); !got.Equal(firstCursor) {
					t.Fatalf("cursor moved to %s by a poll whose event was refused", got)
				}
				n, err = second.pollOnce(t.Context())
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := len(tt.second[0]) + len(tt.second[1]); n != want {
				t.Errorf("the second poll read %d records, want %d: its window starts at the cursor less the overlap", n, want)
			}
			checkCursorBacked(t, f, first.path, cr)
			stored, dups := cr.result()
			if !slices.Equal(stored, all) || dups != tt.dups {
				t.Errorf("core holds %v with %d duplicates, want %v with %d", stored, dups, all, tt.dups)
			}
			if got := cursorAt(t, first.path); !got.Equal(tt.cursor) {
				t.Errorf("cursor %s, want %s", got, tt.cursor)
			}
		})
	}
}

// TestPollConcurrent runs two polls of one cursor_file at once. One run of the translator never
// does (its polls follow one another on one goroutine), but nothing stops two translators (two
// entries of one agent's configuration, or two agents) from being given the same file. Each
// poll reads the cursor, reads the call log, hands its events over, and saves the newest record
// it read: the core stores each event once, the cursor never covers a record whose events the
// core lacks, and a cursor that a slower poll set back only makes the next poll read again
// what the core already has.
func TestPollConcurrent(t *testing.T) {
	t0 := time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)
	a := recorded(logRecord("s-A", "Inbound", "Accepted", t0, 45, t0.Add(70*time.Second)), "R-A")
	b := logRecord("s-B", "Inbound", "Missed", t0, 20, t0.Add(40*time.Second))
	c := logRecord("s-C", "Outbound", "Call connected", t0.Add(2*time.Minute), 30, t0.Add(3*time.Minute))
	all := []string{"s-A/rc-ended", "s-A/rc-recording-R-A", "s-B/rc-ended", "s-B/rc-missed", "s-C/rc-ended"}
	now := func() time.Time { return t0.Add(4 * time.Minute) }
	// within waits for ch to close, and reports false (the test failed) if it does not soon.
	within := func(t *testing.T, ch <-chan struct{}, what string) bool {
		t.Helper()
		select {
		case <-ch:
			return true
		case <-time.After(10 * time.Second):
			t.Errorf("timed out waiting for %s", what)
			return false
		}
	}

	t.Run("both read the same records", func(t *testing.T) {
		f := newFakeRC(t)
		f.setPages([]callLogRecord{a, b}, []callLogRecord{c})
		dir := t.TempDir()
		cr := &core{t: t}
		p1 := newTestPoller(t, f, dir, cr.emit, now, noSleep)
		p2 := newTestPoller(t, f, dir, cr.emit, now, noSleep)
		cr.before = func(event.Event) error { checkCursorBacked(t, f, p1.path, cr); return nil }
		// Each poll's first page is answered only once both asked for it: both have read
		// the cursor (none yet) before either saves one.
		var asked sync.WaitGroup
		asked.Add(2)
		both := make(chan struct{})
		go func() { asked.Wait(); close(both) }()
		f.mu.Lock()
		f.onCallLog = func(r *http.Request) {
			if r.URL.Query().Get("page") == "1" {
				asked.Done()
				within(t, both, "both polls to ask for their first page")
			}
		}
		f.mu.Unlock()
		errs := make(chan error, 2)
		for _, p := range []*poller{p1, p2} {
			go func() { _, err := p.pollOnce(t.Context()); errs <- err }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		checkCursorBacked(t, f, p1.path, cr)
		stored, dups := cr.result()
		if !slices.Equal(stored, all) || dups != len(all) {
			t.Errorf("core holds %v with %d duplicates, want %v with %d", stored, dups, all, len(all))
		}
		if got := cursorAt(t, p1.path); !got.Equal(t0.Add(3 * time.Minute)) {
			t.Errorf("cursor %s, want the newest record's %s", got, t0.Add(3*time.Minute))
		}
	})

	t.Run("the slower one read less and saves last", func(t *testing.T) {
		f := newFakeRC(t)
		f.setPages([]callLogRecord{a, b})
		dir := t.TempDir()
		cr := &core{t: t}
		slow := make(chan struct{}) // closed when the slow poll is handing over its first event
		fastDone := make(chan struct{})
		var once sync.Once
		slowEmit := func(ctx context.Context, e event.Event) error {
			once.Do(func() { close(slow); within(t, fastDone, "the fast poll") })
			return cr.emit(ctx, e)
		}
		p1 := newTestPoller(t, f, dir, slowEmit, now, noSleep)
		p2 := newTestPoller(t, f, dir, cr.emit, now, noSleep)
		cr.before = func(event.Event) error { checkCursorBacked(t, f, p1.path, cr); return nil }
		errs := make(chan error, 1)
		go func() { _, err := p1.pollOnce(t.Context()); errs <- err }()
		if !within(t, slow, "the slow poll to read the call log") {
			t.FailNow()
		}
		// A call ends after the slow poll read the log; the fast one reads it and saves first.
		f.setPages([]callLogRecord{a, b}, []callLogRecord{c})
		if _, err := p2.pollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := cursorAt(t, p2.path); !got.Equal(t0.Add(3 * time.Minute)) {
			t.Errorf("cursor %s after the fast poll, want %s", got, t0.Add(3*time.Minute))
		}
		close(fastDone)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		checkCursorBacked(t, f, p1.path, cr)
		// The slow poll saved the newest record it read, before the fast one's: the next poll
		// reads the new call again, and the core already has it.
		if _, err := p1.pollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkCursorBacked(t, f, p1.path, cr)
		stored, _ := cr.result()
		if !slices.Equal(stored, all) {
			t.Errorf("core holds %v, want %v", stored, all)
		}
		if got := cursorAt(t, p1.path); !got.Equal(t0.Add(3 * time.Minute)) {
			t.Errorf("cursor %s, want %s", got, t0.Add(3*time.Minute))
		}
	})
}

// TestOneTranslatorPerCursor: a second translator given a cursor_file that a running one holds
// refuses to start, naming the file, instead of polling beside it and setting the cursor back;
// once the first has stopped, the file is free again.
func TestOneTranslatorPerCursor(t *testing.T) {
	f := newFakeRC(t)
	cfg := config(f, t.TempDir(), false)
	stop := run(t, cfg, &recorder{})
	testwait.Until(t, 20*time.Second, "the first translator to poll the call log", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.logCalls > 0
	})
	err := (&Translator{Logger: quiet()}).Run(t.Context(), cfg, &recorder{})
	if !errors.Is(err, filelock.ErrHeld) || !strings.Contains(err.Error(), "cursor.json is in use by another translator") {
		t.Fatalf("second translator on the same cursor_file: %v, want it refused", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("first translator: %v", err)
	}
	if err := run(t, cfg, &recorder{})(); err != nil {
		t.Fatalf("a translator started after the first stopped: %v", err)
	}
}
