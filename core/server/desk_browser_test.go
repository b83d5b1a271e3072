package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/store"
)

// Environment variables of the browser test.
const (
	// envRequireBrowser set to "1" turns the skip for want of Chromium into a failure.
	envRequireBrowser = "CALLWIRE_REQUIRE_BROWSER"
	// envChromium names the browser binary to use instead of searching PATH.
	envChromium = "CALLWIRE_CHROMIUM"
	// envArtifacts names a directory the test copies its screenshot into.
	envArtifacts = "CALLWIRE_ARTIFACTS_DIR"
	// envInstall set to "0" stops the test from installing Chromium itself.
	envInstall = "CALLWIRE_BROWSER_INSTALL"
)

// chromium returns the path of a Chromium (or Chrome) binary: the one CALLWIRE_CHROMIUM names,
// or one on PATH, or, when there is none and the machine has apt-get and the test runs as root,
// Debian's chromium package installed for the purpose (unless CALLWIRE_BROWSER_INSTALL=0). Where none can be had, the test skips
// loudly, or fails under CALLWIRE_REQUIRE_BROWSER=1.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		return p
	}
	find := func() string {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	why := "no chromium on PATH"
	if _, err := exec.LookPath("apt-get"); os.Getenv(envInstall) == "0" {
		why += " (" + envInstall + "=0: not installing it)"
	} else if err == nil && os.Geteuid() == 0 {
		t.Log("chromium is not installed: installing Debian's chromium package (a minute or two)")
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		var out strings.Builder
		for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "chromium"}} {
			cmd := exec.CommandContext(ctx, "apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				why = fmt.Sprintf("apt-get %s failed: %v: %s", strings.Join(args, " "), err, lastLines(out.String(), 5))
				break
			}
		}
		if p := find(); p != "" {
			return p
		}
	} else {
		why += ", and it cannot be installed here (needs apt-get and root)"
	}
	msg := "the real-browser test of /desk needs Chromium: " + why + ". Install it (apt-get install chromium) " +
		"or name one with " + envChromium + "; " + envRequireBrowser + "=1 makes its absence a failure."
	if os.Getenv(envRequireBrowser) == "1" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING: " + msg)
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// lookupAdapter is a clinic's client system: it knows Ada Lovelace, Charles Babbage and Mary
// Somerville by their numbers.
func lookupAdapter(t *testing.T) *httptest.Server {
	t.Helper()
	known := map[string]string{
		"+442071234567": `{"clients":[{"externalId":"c-42","name":"Ada Lovelace"}]}`,
		"+442079460123": `{"clients":[{"externalId":"c-7","name":"Charles Babbage"}]}`,
		"+447700900789": `{"clients":[{"externalId":"c-9","name":"Mary Somerville"}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if body, ok := known[r.URL.Query().Get("number")]; ok {
			fmt.Fprint(w, body)
			return
		}
		fmt.Fprint(w, `{"clients":[]}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// ringing is a call_received body from the party, for the locations, ringing now.
func ringing(providerCallID, from, locations string) string {
	return fmt.Sprintf(`{"type":"call_received","providerCallId":%q,"occurredAt":%q,"locations":%s,`+
		`"call":{"direction":"inbound","from":%s,"to":{"number":"+442079460000"}}}`,
		providerCallID, time.Now().UTC().Format(time.RFC3339), locations, from)
}

// TestDeskInBrowser opens /desk in headless Chromium, enters a desk key in its settings, and
// watches calls ring: a known caller appears with the name the clinic's lookup adapter gave, a
// withheld number as such, and another clinic's call never.
func TestDeskInBrowser(t *testing.T) {
	exe := chromium(t)
	e := start(t, backends()[0].db(t), withBroker)
	adapter := lookupAdapter(t)
	if err := e.st.UpdateOrgLookup(t.Context(), e.org, store.Lookup{URL: adapter.URL + "/clients/by-phone"}); err != nil {
		t.Fatalf("set lookup: %v", err)
	}
	deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
	other := e.newOrg("Hillside Clinic")
	otherID, otherSecret := e.newKey(other, nil, auth.ScopeCallsEvents)

	b := openBrowser(t, exe, 1200, 860)
	ctx, step, waitText := b.ctx, b.step, b.waitText

	// First visit: no key yet, so the settings open by themselves. Enter the key once.
	step("open /desk and enter the key",
		chromedp.Navigate(e.base+"/desk"),
		chromedp.WaitVisible("#client-id"),
		chromedp.SetValue("#client-id", deskID),
		chromedp.SetValue("#client-secret", deskSecret),
		chromedp.SetValue("#locations", "front, main"),
		chromedp.Click("#save"),
		chromedp.WaitVisible(`#status[data-state="connected"]`),
	)

	// A known caller, a caller the client system does not know, another clinic's call, and a
	// withheld number.
	for _, post := range []struct {
		id, secret, body string
	}{
		{e.clientID, e.secret, ringing("desk-1", `{"number":"+442071234567"}`, `["front"]`)},
		{e.clientID, e.secret, ringing("desk-2", `{"number":"+447700900123","name":"MOBILE CALLER"}`, `["main"]`)},
		{otherID, otherSecret, ringing("other-1", `{"number":"+442071234567","name":"Grace Hopper"}`, `["front"]`)},
		{e.clientID, e.secret, ringing("desk-3", `{"kind":"anonymous"}`, `["front"]`)},
	} {
		if r := e.postAs(post.id, post.secret, post.body); r.status != http.StatusCreated {
			t.Fatalf("post: %d %s", r.status, r.raw)
		}
	}
	waitText("Ada Lovelace")
	waitText("c-42")
	waitText("+44 20 7123 4567")
	waitText("MOBILE CALLER")
	waitText("Withheld number")
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "Grace Hopper") {
		t.Error("another clinic's call appeared on the desk")
	}
	cards, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#ringing .card").length`))
	if err != nil || cards != 3 {
		t.Errorf("%d cards ringing (%v), want 3", cards, err)
	}

	// The cards slide in: take the picture once they are still.
	step("wait for the cards to settle", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](`document.getAnimations().every(a => a.animationName !== "arrive" || a.playState === "finished")`,
			chromedp.WithPollingTimeout(10*time.Second))(ctx, tg)
		return err
	}))
	b.screenshot("desk.png", false)

	// The key was entered once: after a reload the desk connects again by itself.
	step("reload",
		chromedp.Reload(),
		chromedp.WaitVisible(`#status[data-state="connected"]`),
	)
	open, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("settings").open`))
	if err != nil || open {
		t.Errorf("settings open after a reload (%v): the key was not kept", err)
	}

	b.checkConsole()

}

// browser is a headless Chromium driving one page, with what the page logged to its console.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// openBrowser starts Chromium (exe) with a window of the given size and a profile of its own
// under a temporary directory, which also receives the screenshots. The browser ends with the
// test; a failed test logs the browser's own output.
func openBrowser(t *testing.T, exe string, width, height int) *browser {
	t.Helper()
	dir := t.TempDir()
	var browserOut syncBuffer
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("lang", "en-GB"),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
		chromedp.WindowSize(width, height),
		chromedp.CombinedOutput(&browserOut),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {}))
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("browser output:\n%s", lastLines(browserOut.String(), 30))
		}
	})
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int]("1")); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	b := &browser{t: t, ctx: ctx, dir: dir}
	// Everything the page writes to the console, uncaught exceptions and refusals by the
	// Content-Security-Policy included.
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// step runs actions, failing the test when they do not finish within 20 seconds.
func (b *browser) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// until waits up to 15 seconds for the JavaScript expression to be true; when it does not
// come true, the test fails with what the page shows.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	err := chromedp.Do(sctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second))(ctx, tg)
		return err
	}))
	if err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.t.Fatalf("wait for %s: %v; the page shows:\n%s", what, err, text)
	}
}

// click clicks the element sel names. A list the page draws again (a notice came) may replace
// the element between finding it and clicking it; then the click is tried again, up to three
// times.
func (b *browser) click(what, sel string) {
	b.t.Helper()
	for attempt := 1; ; attempt++ {
		sctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
		err := chromedp.Do(sctx, chromedp.Click(sel))
		cancel()
		if err == nil {
			return
		}
		if attempt == 3 {
			b.t.Fatalf("%s: %v", what, err)
		}
	}
}

// waitText waits until the page shows text.
func (b *browser) waitText(text string) {
	b.t.Helper()
	q, _ := json.Marshal(text)
	b.until(text, `document.body.innerText.includes(`+string(q)+`)`)
}

// eval runs a JavaScript expression and returns its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshot saves the window (or, full, the whole page) as name in the test's directory, and
// copies it into CALLWIRE_ARTIFACTS_DIR when that is set; it logs where.
func (b *browser) screenshot(name string, full bool) {
	b.t.Helper()
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(b.ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	if art := os.Getenv(envArtifacts); art != "" {
		if err := os.MkdirAll(art, 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(art, name), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.t.Logf("screenshot copied to %s", filepath.Join(art, name))
	}
}

// checkConsole logs what the page wrote to its console and fails on any script error or policy
// refusal.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		b.t.Logf("console %s: %s", m.Type, m.Text)
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
			b.t.Errorf("the page logged %s: %s", m.Type, m.Text)
		}
	}
}

// enterKey opens the settings, enters a desk key and waits for the desk to connect.
func (b *browser) enterKey(clientID, secret string) {
	b.t.Helper()
	b.step("enter the key "+clientID,
		chromedp.Click("#open-settings"),
		chromedp.WaitVisible("#client-id"),
		chromedp.SetValue("#client-id", clientID),
		chromedp.SetValue("#client-secret", secret),
		chromedp.SetValue("#locations", "front, main"),
		chromedp.Click("#save"),
		chromedp.WaitVisible(`#status[data-state="connected"]`),
	)
}

// wavTone is a WAV file of a one-second 440 Hz tone, 8 kHz, 16-bit mono: a call's recording.
func wavTone() []byte {
	const rate, n = 8000, 8000
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1)) // PCM
	le(uint16(1)) // mono
	le(uint32(rate))
	le(uint32(2 * rate))
	le(uint16(2))
	le(uint16(16))
	b.WriteString("data")
	le(uint32(2 * n))
	for i := range n {
		le(int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate)))
	}
	return b.Bytes()
}

// TestDeskHistoryViewsInBrowser opens /desk in headless Chromium with a key that reads the call
// history, and checks its two history views: To call back shows a missed caller as soon as the
// call ends and drops them when the clinic calls back, without a reload; Calls shows today's calls,
// filters them, opens a call's timeline and plays its recording; a key without org.calls.read is
// told so instead.
func TestDeskHistoryViewsInBrowser(t *testing.T) {
	exe := chromium(t)
	e := start(t, backends()[0].db(t), withBroker)
	if _, ok := e.st.(store.CallbackStore); !ok {
		t.Fatal("the embedded store keeps no to-call-back list")
	}
	const zone = "Europe/London"
	if err := e.st.UpdateOrgRegion(t.Context(), e.org, store.Region{TimeZone: zone, Country: "GB"}); err != nil {
		t.Fatal(err)
	}
	adapter := lookupAdapter(t)
	if err := e.st.UpdateOrgLookup(t.Context(), e.org, store.Lookup{URL: adapter.URL + "/clients/by-phone"}); err != nil {
		t.Fatalf("set lookup: %v", err)
	}
	deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead, auth.ScopeCallsRead, auth.ScopeCallbacksWrite)
	readerID, readerSecret := e.newKey(e.org, nil, auth.ScopePopupsRead, auth.ScopeCallsRead)
	popupsID, popupsSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
	recordings := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "audio/wav")
		http.ServeContent(w, r, "ada.wav", time.Time{}, bytes.NewReader(wavTone()))
	}))
	t.Cleanup(recordings.Close)

	// Today's calls, in the organization's zone: they start ten minutes ago, or at its midnight
	// when that is later (a start after now is read as now).
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	y, m, d := now.In(loc).Date()
	base := now.Add(-10 * time.Minute)
	if midnight := time.Date(y, m, d, 0, 0, 1, 0, loc); base.Before(midnight) {
		base = midnight
	}
	at := func(sec int) string { return base.Add(time.Duration(sec) * time.Second).UTC().Format(time.RFC3339) }
	event := func(typ, id, dir, from, to string, seq, sec int, extra string) string {
		return fmt.Sprintf(`{"type":%q,"providerCallId":%q,"sequence":%d,"occurredAt":%q,"locations":["front"],`+
			`"call":{"direction":%q,"from":%s,"to":%s}%s}`, typ, id, seq, at(sec), dir, from, to, extra)
	}
	post := func(what string, evs ...string) reply {
		t.Helper()
		r := e.post(batch(evs...))
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, r.status, r.raw)
		}
		return r
	}
	const (
		reception = `{"kind":"extension","extension":"200"}`
		ext201    = `{"kind":"extension","extension":"201"}`
		ada       = `{"number":"+442071234567"}`
		mary      = `{"number":"+447700900789","name":"M SOMERVILLE"}`
		charles   = `{"number":"+442079460123"}`
		supplier  = `{"number":"+441632960555","name":"Surgical Supplies Ltd"}`
	)
	// Ada rang and was answered by 201; the call was recorded.
	adaCall := post("Ada's call",
		event("call_received", "ada-1", "inbound", ada, reception, 1, 0, ""),
		event("call_answered", "ada-1", "inbound", ada, reception, 2, 8, `,"answeredBy":"201"`),
		event("call_ended", "ada-1", "inbound", ada, reception, 3, 103, `,"disposition":"answered","talkTime":95,"duration":103`),
		event("call_recorded", "ada-1", "inbound", ada, reception, 4, 104,
			fmt.Sprintf(`,"url":%q,"mimeType":"audio/wav","bytes":16044,"duration":1`, recordings.URL+"/recordings/ada-1.wav")),
	).body.Calls[0].ID
	// 201 called a supplier, who answered.
	post("the supplier's call",
		event("call_placed", "out-1", "outbound", ext201, supplier, 1, 120, ""),
		event("call_answered", "out-1", "outbound", ext201, supplier, 2, 130, ""),
		event("call_ended", "out-1", "outbound", ext201, supplier, 3, 190, `,"disposition":"answered","talkTime":60`),
	)
	// Mary rang, nobody answered, and she left a voicemail.
	post("Mary's voicemail",
		event("call_received", "mary-1", "inbound", mary, reception, 1, 200, ""),
		event("call_ended", "mary-1", "inbound", mary, reception, 2, 240, `,"disposition":"voicemail","duration":40`),
	)

	b := openBrowser(t, exe, 1280, 900)
	b.step("open /desk", chromedp.Navigate(e.base+"/desk"), chromedp.WaitVisible("#client-id"))
	b.step("enter the desk key",
		chromedp.SetValue("#client-id", deskID),
		chromedp.SetValue("#client-secret", deskSecret),
		chromedp.SetValue("#locations", "front, main"),
		chromedp.Click("#save"),
		chromedp.WaitVisible(`#status[data-state="connected"]`),
	)

	// To call back: Mary, with her voicemail, and a Dismiss button (the key may dismiss).
	b.step("open To call back", chromedp.Click("#tab-callbacks"), chromedp.WaitVisible("#callbacks-list"))
	b.until("Mary on the list", `[...document.querySelectorAll("#callbacks-list .row")].some(r => r.textContent.includes("Mary Somerville") && r.textContent.includes("Left a voicemail") && r.querySelector(".dismiss"))`)

	// Charles rings and hangs up: the list shows him once the call has ended, without a reload.
	post("Charles rings", event("call_received", "charles-1", "inbound", charles, reception, 1, 300, ""))
	if got := eval[bool](b, `document.getElementById("callbacks-list").textContent.includes("Charles Babbage")`); got {
		t.Fatal("Charles is on the list while his call still rings")
	}
	post("Charles's call is missed", event("call_missed", "charles-1", "inbound", charles, reception, 2, 320, ""))
	ended := time.Now()
	b.until("Charles on the list", `document.getElementById("callbacks-list").textContent.includes("Charles Babbage")`)
	t.Logf("the missed call was on the desk's To call back list %v after its end was answered", time.Since(ended).Round(time.Millisecond))
	if got := eval[int](b, `document.querySelectorAll("#callbacks-list .row").length`); got != 2 {
		t.Errorf("%d callers to call back, want 2 (Charles and Mary)", got)
	}
	if got := eval[string](b, `document.querySelector("#callbacks-list .row .row-title").textContent`); got != "Charles Babbage" {
		t.Errorf("first on the list: %q, want Charles Babbage (newest first)", got)
	}
	if got := eval[string](b, `document.getElementById("callbacks-count").textContent`); got != "2" {
		t.Errorf("the tab counts %q callers, want 2", got)
	}
	b.until("the list to settle", `document.getAnimations().length === 0 || document.getAnimations().every(a => a.playState !== "running" || a.animationName === "pulse" || a.animationName === "blink")`)
	b.screenshot("desk-callbacks.png", false)

	// 201 calls Charles back (he does not pick up: an attempt settles it): he leaves the list.
	post("201 calls Charles back",
		event("call_placed", "back-1", "outbound", ext201, charles, 1, 400, ""),
		event("call_ended", "back-1", "outbound", ext201, charles, 2, 430, `,"disposition":"no_answer"`),
	)
	called := time.Now()
	b.until("Charles off the list", `!document.getElementById("callbacks-list").textContent.includes("Charles Babbage")`)
	t.Logf("the called-back caller left the desk's list %v after the call back was answered", time.Since(called).Round(time.Millisecond))

	// Calls: today's five calls, newest first, in the organization's zone.
	b.step("open Calls", chromedp.Click("#tab-calls"), chromedp.WaitVisible("#calls-list"))
	rows := `document.querySelectorAll("#calls-list .row").length`
	b.until("today's five calls", rows+` === 5`)
	if got := eval[string](b, `document.getElementById("calls-day").textContent`); !strings.Contains(got, zone) {
		t.Errorf("the day reads %q, want it to name %s", got, zone)
	}
	for _, want := range []string{"Ada Lovelace", "Surgical Supplies Ltd", "Mary Somerville", "Charles Babbage", "Answered", "Voicemail", "Missed", "Not answered", "Recording"} {
		if !strings.Contains(eval[string](b, `document.getElementById("calls-list").textContent`), want) {
			t.Errorf("the Calls view does not show %q", want)
		}
	}
	setFilter := func(id, value, event string) {
		t.Helper()
		js, _ := json.Marshal(value)
		eval[bool](b, fmt.Sprintf(`(() => { const f = document.getElementById(%q); f.value = %s; f.dispatchEvent(new Event(%q)); return true })()`, id, js, event))
	}
	// Filters: the missed calls; then a number's calls, by its last four digits.
	setFilter("filter-outcome", "missed", "change")
	b.until("the missed call alone", rows+` === 1 && document.getElementById("calls-list").textContent.includes("Charles Babbage")`)
	b.screenshot("desk-calls-missed.png", false)
	setFilter("filter-outcome", "", "change")
	setFilter("filter-number", "0123", "input")
	b.until("Charles's two calls", rows+` === 2 && [...document.querySelectorAll("#calls-list .row")].every(r => r.textContent.includes("+44 20 7946 0123"))`)
	setFilter("filter-direction", "outbound", "change")
	b.until("the call back alone", rows+` === 1 && document.getElementById("calls-list").textContent.includes("Not answered")`)
	setFilter("filter-direction", "", "change")
	setFilter("filter-number", "", "input")
	b.until("the five calls again", rows+` === 5`)

	// A click on Ada's call opens its timeline, and its recording plays in the page.
	b.click("open Ada's call", fmt.Sprintf(`#calls-list .row[data-id=%q]`, adaCall))
	b.step("open Ada's call", chromedp.WaitVisible("#call-detail"))
	b.until("Ada's timeline", `document.querySelectorAll("#detail-timeline .tl").length === 4`)
	timeline := eval[string](b, `document.getElementById("call-detail").textContent`)
	for _, want := range []string{"Ada Lovelace", "Rang", "Answered", "by 201", "Ended", "talk 1:35", "Recorded", "call_answered:2", "c-42"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline does not show %q:\n%s", want, timeline)
		}
	}
	eval[bool](b, `(() => { const a = document.querySelector("#detail-recordings audio"); a.preload = "auto"; a.load(); return true })()`)
	b.until("the recording to load", `(() => { const a = document.querySelector("#detail-recordings audio"); return a.readyState >= 1 && a.duration > 0.9 && a.duration < 1.1 })()`)
	played, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => { const a = document.querySelector("#detail-recordings audio"); `+
		`return a.play().then(() => new Promise(r => setTimeout(r, 300))).then(() => { a.pause(); return a.currentTime > 0 }, () => false) })()`,
		chromedp.EvalAwaitPromise))
	if err != nil || !played {
		t.Errorf("the recording did not play in the page (%v)", err)
	}
	b.screenshot("desk-calls.png", true)

	// Dismissing Mary takes her off the list.
	b.step("open To call back", chromedp.Click("#tab-callbacks"))
	b.until("Mary's Dismiss button", `document.querySelector('#callbacks-list .row[data-number="+447700900789"] .dismiss') !== null`)
	b.click("dismiss Mary", `#callbacks-list .row[data-number="+447700900789"] .dismiss`)
	b.until("Mary off the list", `!document.getElementById("callbacks-list").textContent.includes("Mary Somerville") && !document.getElementById("callbacks-empty").hidden`)

	// A key that reads the history but may not dismiss: no Dismiss button.
	post("Ada's missed call",
		event("call_received", "ada-2", "inbound", ada, reception, 1, 500, ""),
		event("call_missed", "ada-2", "inbound", ada, reception, 2, 520, ""),
	)
	b.enterKey(readerID, readerSecret)
	b.step("open To call back", chromedp.Click("#tab-callbacks"))
	b.until("Ada on the list", `document.getElementById("callbacks-list").textContent.includes("Ada Lovelace")`)
	if got := eval[int](b, `document.querySelectorAll("#callbacks-list .dismiss").length`); got != 0 {
		t.Errorf("%d Dismiss buttons for a key without org.callbacks.write", got)
	}

	// A key that reads popups only: both views say what the key lacks instead.
	b.enterKey(popupsID, popupsSecret)
	b.step("open Calls", chromedp.Click("#tab-calls"))
	b.until("the scope message", `!document.getElementById("calls-message").hidden && document.getElementById("calls-message").textContent.includes("org.calls.read") && document.getElementById("calls-filters").hidden`)
	b.screenshot("desk-calls-no-scope.png", false)
	b.step("open To call back", chromedp.Click("#tab-callbacks"))
	b.until("the scope message", `!document.getElementById("callbacks-message").hidden && document.getElementById("callbacks-message").textContent.includes("org.calls.read") && document.querySelectorAll("#callbacks-list .row").length === 0`)

	b.checkConsole()
}
