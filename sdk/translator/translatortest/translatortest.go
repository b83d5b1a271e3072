// Package translatortest is the contract check any translator can run on itself, in process,
// with no agent and no callwire server:
//
//	func TestContract(t *testing.T) {
//		events := translatortest.Check(t, &myTranslator{}, translatortest.Options{
//			Config: json.RawMessage(`{"path": "testdata/calls.csv"}`),
//			Want:   4,
//		})
//		// ... assertions on events ...
//	}
//
// Check runs the translator the way the agent does and fails the test when the translator breaks
// the contract of translator.Translator and translator.Emitter.
package translatortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
)

// refusal is what the check's emitter answers when it refuses an event to see how the
// translator copes: what the agent answers when its outbox is full.
func refusal() error {
	return &translator.RefusedError{Reason: "outbox full (refused on purpose by translatortest)"}
}

// isRefusal reports whether err is (or wraps) the agent's refusal of an event.
func isRefusal(err error) bool {
	var r *translator.RefusedError
	return errors.As(err, &r)
}

// Options tune Check. The zero value runs the translator with an empty configuration until it
// has been quiet for Settle.
type Options struct {
	// Config is handed to Run; nil means {}.
	Config json.RawMessage
	// Want, when above zero, ends the run once that many events were taken.
	Want int
	// Settle ends the run once no event came for this long (when Want is zero, or never reached
	// within Timeout). Default 500ms.
	Settle time.Duration
	// Timeout bounds the whole run. Default 10s.
	Timeout time.Duration
	// RefuseFirst refuses the translator's first Emit once, as a full outbox would, to check
	// that it neither panics nor loses the event: it must emit it again or end Run with an error.
	RefuseFirst bool
}

// Check runs tr until it has emitted opts.Want events (or fell quiet), then cancels it, and
// returns the events the emitter took, in order. It fails t when:
//   - an emitted event does not validate, or does not survive its canonical JSON (what crosses
//     the wire to the agent);
//   - two events of one call share a dedupe key but differ: the core would keep the first and
//     drop the second as a duplicate (a type emitted twice in one call needs a providerEventId or
//     a sequence);
//   - Run writes to stdout (it carries the plugin handshake);
//   - Run does not return within 5 seconds of its context ending, or returns an error other
//     than the context's then;
//   - with RefuseFirst, the refused event is neither emitted again nor reported by Run.
//
// Check redirects the process's stdout while the translator runs: do not run it in parallel
// with tests that write to stdout.
func Check(t testing.TB, tr translator.Translator, opts Options) []event.Event {
	t.Helper()
	if opts.Config == nil {
		opts.Config = json.RawMessage(`{}`)
	}
	if opts.Settle <= 0 {
		opts.Settle = 500 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	em := &emitter{t: t, refuse: opts.RefuseFirst, got: make(chan struct{}, 1)}

	stdout := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("translatortest: %v", err)
	}
	os.Stdout = w
	var printed bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&printed, r); close(copied) }()

	ctx, cancel := context.WithTimeout(t.Context(), opts.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("translatortest: Run panicked: %v", p)
			}
		}()
		done <- tr.Run(ctx, opts.Config, em)
	}()

	var runErr error
	ended := false
	quiet := time.NewTimer(opts.Settle)
wait:
	for {
		select {
		case runErr = <-done:
			ended = true
			break wait
		case <-em.got:
			if opts.Want > 0 && em.count() >= opts.Want {
				break wait
			}
			quiet.Reset(opts.Settle)
		case <-quiet.C:
			if opts.Want == 0 || em.count() >= opts.Want {
				break wait
			}
			quiet.Reset(opts.Settle)
		case <-ctx.Done():
			break wait
		}
	}
	cancel()
	if !ended {
		select {
		case runErr = <-done:
			if runErr != nil && !errors.Is(runErr, context.Canceled) && !errors.Is(runErr, context.DeadlineExceeded) {
				t.Errorf("translatortest: Run returned %v after its context ended; want nil or the context's error", runErr)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("translatortest: Run did not return within 5s of its context ending")
		}
	} else if runErr != nil && !(opts.RefuseFirst && isRefusal(runErr)) {
		t.Errorf("translatortest: Run ended on its own with %v", runErr)
	}
	os.Stdout = stdout
	w.Close()
	<-copied
	if printed.Len() > 0 {
		t.Errorf("translatortest: the translator wrote to stdout, which carries the plugin protocol: %q", printed.String())
	}

	events := em.events()
	if opts.Want > 0 && len(events) < opts.Want {
		t.Errorf("translatortest: %d events taken, want at least %d", len(events), opts.Want)
	}
	if opts.RefuseFirst && em.refusedEvent != nil && !(ended && isRefusal(runErr)) {
		again := false
		for _, e := range events {
			if sameEvent(e, *em.refusedEvent) {
				again = true
				break
			}
		}
		if !again {
			t.Errorf("translatortest: the refused event (%s of %s) was lost: neither emitted again nor reported by Run", em.refusedEvent.Type, em.refusedEvent.ProviderCallID)
		}
	}
	return events
}

type emitter struct {
	t      testing.TB
	mu     sync.Mutex
	taken  []event.Event
	bodies map[string][]byte // call + dedupe key -> canonical JSON
	refuse bool
	got    chan struct{}

	refusedEvent *event.Event
}

func (em *emitter) Emit(_ context.Context, e event.Event) error {
	em.mu.Lock()
	defer em.mu.Unlock()
	if err := e.Validate(); err != nil {
		em.t.Errorf("translatortest: emitted an invalid event: %v", err)
		return err
	}
	body, err := json.Marshal(e)
	if err != nil {
		em.t.Errorf("translatortest: emitted an event that does not encode: %v", err)
		return err
	}
	if _, _, err := event.ParseBody(body); err != nil {
		em.t.Errorf("translatortest: an emitted event does not survive its canonical JSON: %v", err)
		return err
	}
	if em.refuse {
		em.refuse = false
		e := e
		em.refusedEvent = &e
		return refusal()
	}
	if em.bodies == nil {
		em.bodies = map[string][]byte{}
	}
	key := e.EffectiveProvider() + "\x00" + e.ProviderCallID + "\x00" + e.DedupeKey()
	if prev, ok := em.bodies[key]; ok && !bytes.Equal(prev, body) {
		em.t.Errorf("translatortest: two different events of call %q share the dedupe key %q; the core would drop the second (give it a providerEventId or a sequence)",
			e.ProviderCallID, e.DedupeKey())
	}
	em.bodies[key] = body
	em.taken = append(em.taken, e)
	select {
	case em.got <- struct{}{}:
	default:
	}
	return nil
}

func (em *emitter) count() int {
	em.mu.Lock()
	defer em.mu.Unlock()
	return len(em.taken)
}

func (em *emitter) events() []event.Event {
	em.mu.Lock()
	defer em.mu.Unlock()
	return append([]event.Event(nil), em.taken...)
}

func sameEvent(a, b event.Event) bool {
	return a.EffectiveProvider() == b.EffectiveProvider() && a.ProviderCallID == b.ProviderCallID && a.DedupeKey() == b.DedupeKey()
}
