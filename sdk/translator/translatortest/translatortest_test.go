package translatortest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/sdk/translator/translatortest"
)

// fn is a translator made of a function.
type fn func(ctx context.Context, out translator.Emitter) error

func (f fn) Run(ctx context.Context, _ json.RawMessage, out translator.Emitter) error {
	return f(ctx, out)
}

func ev(callID string, seq int64, t event.Type) event.Event {
	e := event.New(t, callID, time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC), event.Call{Direction: event.Inbound, From: event.E164("+442071234567")})
	e.Sequence = seq
	return e
}

// good emits three events, retrying a refused one, then waits for the end.
func good(ctx context.Context, out translator.Emitter) error {
	for i, t := range []event.Type{event.CallReceived, event.CallAnswered, event.CallEnded} {
		for {
			err := out.Emit(ctx, ev("c1", int64(i), t))
			var refused *translator.RefusedError
			if err == nil {
				break
			}
			if !errors.As(err, &refused) {
				return err
			}
			time.Sleep(5 * time.Millisecond) // the translator's pause before it offers the event again
		}
	}
	<-ctx.Done()
	return nil
}

// recorder is a testing.TB that keeps failures instead of failing.
type recorder struct {
	*testing.T
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

func TestGoodTranslatorPasses(t *testing.T) {
	events := translatortest.Check(t, fn(good), translatortest.Options{Want: 3, RefuseFirst: true})
	if len(events) != 3 || events[0].Type != event.CallReceived {
		t.Fatalf("events %+v", events)
	}
}

func TestBrokenTranslatorsAreCaught(t *testing.T) {
	// released lets the translator that ignores its context return once the test is over, and
	// not a moment sooner however long Check takes to give up on it.
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	for _, tc := range []struct {
		name string
		tr   fn
		opts translatortest.Options
		want string
	}{
		{"invalid event", func(ctx context.Context, out translator.Emitter) error {
			bad := ev("c1", 0, event.CallReceived)
			bad.Call.Direction = "sideways"
			out.Emit(ctx, bad)
			<-ctx.Done()
			return nil
		}, translatortest.Options{Settle: 100 * time.Millisecond}, "invalid event"},
		{"writes to stdout", func(ctx context.Context, out translator.Emitter) error {
			fmt.Println("hello")
			<-ctx.Done()
			return nil
		}, translatortest.Options{Settle: 100 * time.Millisecond}, "stdout"},
		{"ignores its context", func(ctx context.Context, out translator.Emitter) error {
			<-released
			return nil
		}, translatortest.Options{Settle: 100 * time.Millisecond}, "did not return"},
		{"same dedupe key, different event", func(ctx context.Context, out translator.Emitter) error {
			a, b := ev("c1", 0, event.CallHold), ev("c1", 0, event.CallHold)
			b.Released = event.Ptr(true)
			out.Emit(ctx, a)
			out.Emit(ctx, b)
			<-ctx.Done()
			return nil
		}, translatortest.Options{Settle: 100 * time.Millisecond}, "dedupe key"},
		{"loses a refused event", func(ctx context.Context, out translator.Emitter) error {
			out.Emit(ctx, ev("c1", 0, event.CallReceived)) // error ignored: the event is gone
			out.Emit(ctx, ev("c1", 1, event.CallEnded))
			<-ctx.Done()
			return nil
		}, translatortest.Options{Settle: 100 * time.Millisecond, RefuseFirst: true}, "lost"},
		{"panics", func(ctx context.Context, out translator.Emitter) error {
			panic("boom")
		}, translatortest.Options{Settle: 100 * time.Millisecond}, "panicked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{T: t}
			translatortest.Check(r, tc.tr, tc.opts)
			if got := r.failures(); !strings.Contains(got, tc.want) {
				t.Errorf("failures %q, want one mentioning %q", got, tc.want)
			}
		})
	}
}
