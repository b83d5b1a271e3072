package server_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// lookupAdapter is a clinic's client system: it knows one number.
func lookupAdapter(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("number") == "+442071234567" {
			fmt.Fprint(w, `{"clients":[{"externalId":"c-42","name":"Ada Lovelace"}]}`)
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
		chromedp.WindowSize(1200, 860),
		chromedp.CombinedOutput(&browserOut),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {}))
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("browser output:\n%s", lastLines(browserOut.String(), 30))
		}
	}()

	// Everything the page writes to the console, uncaught exceptions and refusals by the
	// Content-Security-Policy included.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int]("1")); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	var consoleMu sync.Mutex
	var console []chromedp.ConsoleMessage
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			consoleMu.Lock()
			console = append(console, m)
			consoleMu.Unlock()
		}
	}()

	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitText := func(text string) {
		t.Helper()
		q, _ := json.Marshal(text)
		step("wait for "+text, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.body.innerText.includes(`+string(q)+`)`,
				chromedp.WithPollingTimeout(15*time.Second))(ctx, tg)
			return err
		}))
	}

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
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(dir, "desk.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the desk: %s", shot)
	if art := os.Getenv(envArtifacts); art != "" {
		if err := os.MkdirAll(art, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(art, "desk.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot copied to %s", filepath.Join(art, "desk.png"))
	}

	// The key was entered once: after a reload the desk connects again by itself.
	step("reload",
		chromedp.Reload(),
		chromedp.WaitVisible(`#status[data-state="connected"]`),
	)
	open, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("settings").open`))
	if err != nil || open {
		t.Errorf("settings open after a reload (%v): the key was not kept", err)
	}

	consoleMu.Lock()
	defer consoleMu.Unlock()
	for _, m := range console {
		t.Logf("console %s: %s", m.Type, m.Text)
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
			t.Errorf("the page logged %s: %s", m.Type, m.Text)
		}
	}
}
