package ringcentral

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
)

// TestHealthKeepsLiveAndPollApart checks that a poll that succeeds does not hide a live path that
// is failing (its socket down, its subscription lost), and that the health names the failure of
// each path that is failing.
func TestHealthKeepsLiveAndPollApart(t *testing.T) {
	f := newFakeRC(t)
	tr := New()
	signIn := errors.New("sign in: connection refused")
	socket := errors.New("open the WebSocket: connection refused")
	tr.setPollHealth(signIn) // as Run does when its first sign-in fails
	tr.setLiveHealth(socket) // as the live path does when its socket fails

	ctx, cancel := context.WithCancel(t.Context())
	p := newTestPoller(t, f, t.TempDir(), func(context.Context, event.Event) error { return nil }, time.Now, noSleep)
	done := make(chan error, 1)
	go func() { done <- tr.pollLoop(ctx, p, 24*time.Hour) }()
	testwait.Until(t, 20*time.Second, "the first poll to succeed", func() bool {
		err := tr.Health(ctx)
		return err != nil && !errors.Is(err, signIn)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("pollLoop: %v", err)
	}
	err := tr.Health(t.Context())
	if !errors.Is(err, socket) || !strings.Contains(err.Error(), "live path: ") {
		t.Errorf("after a poll that succeeded, with the socket down: health %v, want the live path's failure", err)
	}

	poll := errors.New("read the call log: 503")
	tr.setPollHealth(poll)
	err = tr.Health(t.Context())
	if !errors.Is(err, socket) || !errors.Is(err, poll) || !strings.Contains(err.Error(), "call-log poll: ") {
		t.Errorf("both failing: health %v, want both failures", err)
	}
	tr.setLiveHealth(nil)
	if err := tr.Health(t.Context()); !errors.Is(err, poll) || errors.Is(err, socket) {
		t.Errorf("the live path well again, the poll failing: health %v, want the poll's failure only", err)
	}
	tr.setPollHealth(nil)
	if err := tr.Health(t.Context()); err != nil {
		t.Errorf("both well: health %v, want nil", err)
	}
}
