package sip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/translators/sip/callmodel"
)

// fakeModel turns each message into one event of the call named by its Transport field, and
// ends every call it saw 10s after its last message.
type fakeModel struct {
	seq      map[string]int64
	deadline map[string]time.Time
	panicOn  string
}

func newFakeModel() *fakeModel {
	return &fakeModel{seq: map[string]int64{}, deadline: map[string]time.Time{}}
}

func (f *fakeModel) ev(call string, typ event.Type, at time.Time) event.Event {
	f.seq[call]++
	e := event.New(typ, call, at, event.Call{Direction: event.Inbound})
	e.Sequence = f.seq[call]
	return e
}

func (f *fakeModel) ObserveAppend(dst []event.Event, m callmodel.Message) []event.Event {
	if m.Transport == f.panicOn {
		panic("model fault")
	}
	f.deadline[m.Transport] = m.At.Add(10 * time.Second)
	return append(dst, f.ev(m.Transport, event.CallReceived, m.At))
}

func (f *fakeModel) Expire(now time.Time) []event.Event {
	var out []event.Event
	for call, d := range f.deadline {
		if !now.Before(d) {
			out = append(out, f.ev(call, event.CallEnded, d))
			delete(f.deadline, call)
		}
	}
	return out
}

func (f *fakeModel) NextExpiry() time.Time {
	var next time.Time
	for _, d := range f.deadline {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next
}

func (f *fakeModel) Stats() callmodel.Stats { return callmodel.Stats{} }

// fakeEmitter records what it takes; refuse decides per attempt whether to refuse.
type fakeEmitter struct {
	mu     sync.Mutex
	got    []event.Event
	tries  int
	refuse func(try int, e event.Event) error
}

func (f *fakeEmitter) Emit(_ context.Context, e event.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	if f.refuse != nil {
		if err := f.refuse(f.tries, e); err != nil {
			return err
		}
	}
	f.got = append(f.got, e)
	return nil
}

func (f *fakeEmitter) events() []event.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event.Event(nil), f.got...)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func msg(call string, at time.Time) callmodel.Message {
	return callmodel.Message{Transport: call, At: at, Src: netip.MustParseAddrPort("192.0.2.1:5060")}
}

// fakeJSONEmitter is a fakeEmitter that takes encoded events, as the agent's emitter does.
type fakeJSONEmitter struct {
	*fakeEmitter
	encoded atomic.Int64
}

func (f *fakeJSONEmitter) EmitJSON(ctx context.Context, data []byte) error {
	var e event.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return fmt.Errorf("not an event: %w", err)
	}
	f.encoded.Add(1)
	return f.Emit(ctx, e)
}

func TestPipelineOrdersEachCallAndExpires(t *testing.T) {
	t.Run("events", func(t *testing.T) { testPipelineOrdersEachCallAndExpires(t, false) })
	t.Run("encoded", func(t *testing.T) { testPipelineOrdersEachCallAndExpires(t, true) })
}

func testPipelineOrdersEachCallAndExpires(t *testing.T, encoded bool) {
	synctest.Test(t, func(t *testing.T) {
		em := &fakeEmitter{refuse: func(try int, _ event.Event) error {
			if try%3 == 0 { // every third attempt: the outbox is full
				return &translator.RefusedError{Reason: "outbox full"}
			}
			return nil
		}}
		var out translator.Emitter = em
		jem := &fakeJSONEmitter{fakeEmitter: em}
		if encoded {
			out = jem
		}
		p := newPipeline(16, newFakeModel(), out, quiet, time.Now)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { p.run(ctx, time.Second, func(callmodel.Stats) {}); close(done) }()
		for i := range 5 {
			for _, call := range []string{"a", "b", "c"} {
				p.offer(msg(call, time.Now()))
			}
			_ = i
		}
		time.Sleep(11 * time.Second) // every call's deadline passes
		synctest.Wait()
		cancel()
		<-done
		got := map[string][]event.Event{}
		for _, e := range em.events() {
			got[e.ProviderCallID] = append(got[e.ProviderCallID], e)
		}
		for _, call := range []string{"a", "b", "c"} {
			evs := got[call]
			if len(evs) != 6 {
				t.Fatalf("call %s: %d events, want 6", call, len(evs))
			}
			for i, e := range evs {
				if e.Sequence != int64(i+1) {
					t.Errorf("call %s: event %d has sequence %d: order lost", call, i, e.Sequence)
				}
			}
			if evs[5].Type != event.CallEnded {
				t.Errorf("call %s: last event %s, want the expiry's call_ended", call, evs[5].Type)
			}
		}
		if s := p.snapshot(); s.Retried == 0 || s.Emitted != 18 || s.Lost != 0 || s.Dropped != 0 {
			t.Errorf("counters %+v", s)
		}
		if n := jem.encoded.Load(); encoded && n < 18 || !encoded && n != 0 {
			t.Errorf("%d events taken encoded (encoded %v)", n, encoded)
		}
	})
}

func TestPipelineOfferNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeline(4, newFakeModel(), &fakeEmitter{}, quiet, time.Now)
		// Nothing drains the queue: offers past its size are dropped, not waited for.
		for range 10 {
			p.offer(msg("a", time.Now()))
		}
		if s := p.snapshot(); s.Queued != 4 || s.Dropped != 6 {
			t.Errorf("counters %+v, want 4 queued and 6 dropped", s)
		}
	})
}

func TestPipelineContainsFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeModel()
		m.panicOn = "boom"
		invalid := errors.Join(errors.New("event refused as invalid"), &event.ValidationError{Problems: []event.Problem{{Field: "call", Message: "bad"}}})
		em := &fakeEmitter{refuse: func(_ int, e event.Event) error {
			if e.ProviderCallID == "bad" {
				return invalid
			}
			return nil
		}}
		p := newPipeline(16, m, em, quiet, time.Now)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { p.run(ctx, time.Second, func(callmodel.Stats) {}); close(done) }()
		p.offer(msg("boom", time.Now())) // the model panics: skipped
		p.offer(msg("bad", time.Now()))  // the agent refuses the event as invalid: skipped, not retried forever
		p.offer(msg("good", time.Now())) // still translated
		synctest.Wait()
		cancel()
		<-done
		evs := em.events()
		if len(evs) != 1 || evs[0].ProviderCallID != "good" {
			t.Fatalf("emitted %v, want the good call's event only", evs)
		}
		if s := p.snapshot(); s.Invalid != 1 {
			t.Errorf("counters %+v, want 1 invalid", s)
		}
	})
}

func TestPipelineDrainsOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The agent is slow: each event takes 100ms. Stopping still hands over what the model
		// produced, within the drain time.
		em := &fakeEmitter{}
		slow := emitterFunc(func(ctx context.Context, e event.Event) error {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			return em.Emit(ctx, e)
		})
		p := newPipeline(64, newFakeModel(), slow, quiet, time.Now)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { p.run(ctx, 3*time.Second, func(callmodel.Stats) {}); close(done) }()
		for range 10 {
			p.offer(msg("a", time.Now()))
		}
		time.Sleep(10 * time.Millisecond)
		cancel()
		<-done
		if n := len(em.events()); n != 10 {
			t.Errorf("%d events handed over before stopping, want 10", n)
		}
	})
}

type emitterFunc func(context.Context, event.Event) error

func (f emitterFunc) Emit(ctx context.Context, e event.Event) error { return f(ctx, e) }

// TestPipelineClockFollowsTheMessages: messages stamped an hour ago (a replayed capture, or a
// capture agent whose clock is behind) are timed out on their own timeline: a call's 10-second
// deadline falls 10 seconds after its last message arrived, not at once.
func TestPipelineClockFollowsTheMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		em := &fakeEmitter{}
		p := newPipeline(16, newFakeModel(), em, quiet, time.Now)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { p.run(ctx, time.Second, func(callmodel.Stats) {}); close(done) }()
		old := time.Now().Add(-time.Hour)
		p.offer(msg("a", old))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(em.events()); n != 1 {
			t.Fatalf("%d events 5s after a message stamped an hour ago, want 1 (no timeout yet)", n)
		}
		p.offer(msg("a", old.Add(5*time.Second)))
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if n := len(em.events()); n != 2 {
			t.Fatalf("%d events 9s after the last message, want 2", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		evs := em.events()
		if len(evs) != 3 || evs[2].Type != event.CallEnded {
			t.Fatalf("after the deadline: %v, want the call ended", evs)
		}
		cancel()
		<-done
	})
}
