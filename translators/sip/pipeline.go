package sip

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/translators/sip/callmodel"
)

// model is what the pipeline needs of the call model (a *callmodel.Tracker). It is used from one
// goroutine only.
type model interface {
	// ObserveAppend appends the events a message causes to dst.
	ObserveAppend(dst []event.Event, m callmodel.Message) []event.Event
	Expire(now time.Time) []event.Event
	NextExpiry() time.Time
	Stats() callmodel.Stats
}

// pipelineStats are the pipeline's own counters.
type pipelineStats struct {
	queued, dropped, emitted, refused, invalid, lost atomic.Uint64
}

// pipeline carries messages from the observer to the call model and the model's events to the
// agent. offer is safe to call from any goroutine and never blocks.
type pipeline struct {
	in     chan callmodel.Message
	model  model
	out    translator.Emitter
	log    *slog.Logger
	now    func() time.Time
	shards []chan event.Event
	stats  pipelineStats
	// dropLog limits the "queue full" warning to one line per second.
	dropLog atomic.Int64
	// The model's clock: the latest message time seen (lastAt), and when, on the wall clock,
	// it was seen (seenAt). Used by the model's goroutine only.
	lastAt, seenAt time.Time
	// armed is when, on the wall clock, the expiry timer is set to fire; zero once it fired.
	armed time.Time
	// evs is the model's goroutine's slice for a message's events, reused from one to the next.
	evs []event.Event
}

// maxAhead is how far ahead of the wall clock a message's time may be and still move the
// model's clock: a capture agent with a wildly wrong clock must not end every call at once.
const maxAhead = time.Hour

// emitShards is how many events are in flight to the agent at once. Events of one call always go
// through the same shard, so they reach the agent in the order the model emitted them.
const emitShards = 8

// shardQueue bounds each shard's backlog of events; when it is full, the model waits (and the
// message queue before it fills, and drops) rather than the events being dropped.
const shardQueue = 4096

func newPipeline(queue int, m model, out translator.Emitter, log *slog.Logger, now func() time.Time) *pipeline {
	p := &pipeline{in: make(chan callmodel.Message, queue), model: m, out: out, log: log, now: now}
	for range emitShards {
		p.shards = append(p.shards, make(chan event.Event, shardQueue))
	}
	return p
}

// offer queues m for the call model, or drops it (counted) when the queue is full. It never
// blocks and never panics: it is what the call path calls.
func (p *pipeline) offer(m callmodel.Message) {
	select {
	case p.in <- m:
		p.stats.queued.Add(1)
	default:
		n := p.stats.dropped.Add(1)
		now := p.now().Unix()
		if last := p.dropLog.Load(); last != now && p.dropLog.CompareAndSwap(last, now) {
			p.log.Warn("sip observer: translation queue full; SIP messages dropped (calls are not affected, their events may be incomplete)",
				"dropped_total", n, "queue_size", cap(p.in))
		}
	}
}

// run feeds the model until ctx ends, then lets the emitters finish what the model already
// produced for up to drain.
// Every statsEvery, report is called from the model's goroutine with the model's counters.
func (p *pipeline) run(ctx context.Context, drain time.Duration, report func(callmodel.Stats)) {
	var wg sync.WaitGroup
	emitCtx, stopEmit := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEmit()
	for _, sh := range p.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.emitLoop(emitCtx, sh)
		}()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	tick := time.NewTicker(statsEvery)
	defer tick.Stop()
	for {
		p.resetTimer(timer)
		select {
		case <-ctx.Done():
			// What the observer already queued is still translated and handed over.
		queued:
			for {
				select {
				case m := <-p.in:
					p.queue(p.translate(m))
				default:
					break queued
				}
			}
			for _, sh := range p.shards {
				close(sh)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(drain):
				stopEmit()
				<-done
			}
			return
		case m := <-p.in:
			p.queue(p.translate(m))
			p.gather(ctx)
		case <-timer.C:
			p.armed = time.Time{}
			p.queue(p.expire())
		case <-tick.C:
			report(p.model.Stats())
		}
	}
}

// gatherWindow is how long the pipeline lets messages gather after it woke for one, before
// translating them together. Under load, waking the model's goroutine for each message, and an
// emitter for each event, cost the proxy as much CPU as translating them (the thread that runs
// a goroutine is put to sleep and woken by the kernel every time); in batches, it wakes once per
// window. The first message after a quiet moment is translated at once, so a call's first event
// waits for nothing; the messages that follow it wait at most this long.
const gatherWindow = time.Millisecond

// gather waits gatherWindow, then translates the messages queued meanwhile.
func (p *pipeline) gather(ctx context.Context) {
	select {
	case <-time.After(gatherWindow):
	case <-ctx.Done():
		return
	}
	for range cap(p.in) {
		select {
		case m := <-p.in:
			p.queue(p.translate(m))
		default:
			return
		}
	}
}

// modelNow is the time on the messages' own timeline: the latest message time seen, moved on by
// the wall-clock time since it was seen. For live traffic it is the wall clock (within the
// capture agents' skew); for a replayed capture, or an agent whose clock is off, it is that
// timeline, so that a call's ring timeout or grace is measured on the same clock as its
// messages and never fires early because the messages' times are in the past.
func (p *pipeline) modelNow() time.Time {
	wall := p.now()
	if p.lastAt.IsZero() {
		return wall
	}
	return p.lastAt.Add(wall.Sub(p.seenAt))
}

// advance moves the model's clock to a message's time when that is later.
func (p *pipeline) advance(at time.Time) {
	wall := p.now()
	if at.IsZero() || at.After(wall.Add(maxAhead)) {
		return
	}
	if p.lastAt.IsZero() || at.After(p.modelNow()) {
		p.lastAt, p.seenAt = at, wall
	}
}

// translate runs the model on m; a panic in the model is contained and logged, never fatal. The
// events returned are valid until the next translate: queue them at once.
func (p *pipeline) translate(m callmodel.Message) (evs []event.Event) {
	p.advance(m.At)
	clear(p.evs) // what the previous message's events held, handed on already
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("sip observer: the call model failed on a message; it was skipped", "panic", r)
			evs = nil
		}
	}()
	p.evs = p.model.ObserveAppend(p.evs[:0], m)
	return p.evs
}

func (p *pipeline) expire() (evs []event.Event) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("sip observer: the call model failed while ending idle calls", "panic", r)
			evs = nil
		}
	}()
	return p.model.Expire(p.modelNow())
}

// resetTimer arms t for the model's next expiry, at most a minute ahead. A timer already armed
// within a millisecond of that is left alone, rather than reset for every message: Expire ends
// only what is due at the time it runs, so a timer a millisecond off only moves an inferred end
// by that much.
func (p *pipeline) resetTimer(t *time.Timer) {
	next := p.model.NextExpiry()
	d := time.Minute
	if !next.IsZero() {
		d = max(next.Sub(p.modelNow()), time.Millisecond)
		d = min(d, time.Minute)
	}
	at := p.now().Add(d)
	if !p.armed.IsZero() {
		if diff := at.Sub(p.armed); diff > -time.Millisecond && diff < time.Millisecond {
			return
		}
	}
	p.armed = at
	t.Reset(d)
}

// queue hands events to their call's shard, waiting when the shard is full (the emitters are
// never stopped before the shards are closed, so the wait ends).
func (p *pipeline) queue(evs []event.Event) {
	for _, e := range evs {
		p.shards[shardOf(e.ProviderCallID, len(p.shards))] <- e
	}
}

// shardOf picks a call's shard: FNV-1a of its providerCallId, computed in place (hash/fnv's
// hasher would be an allocation per event).
func shardOf(callID string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(callID); i++ {
		h ^= uint32(callID[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// emitLoop emits a shard's events one by one, retrying an event the agent could not take with
// backoff. An event refused as invalid is logged and skipped: it can never be taken. When the
// emitter takes encoded events (translator.JSONEmitter, as the agent's does), the loop encodes each
// event once, into a buffer of its own that it reuses, trusting the raw the call model wrote in
// canonical form.
func (p *pipeline) emitLoop(ctx context.Context, events <-chan event.Event) {
	enc, _ := p.out.(translator.JSONEmitter)
	var buf []byte
	for e := range events {
		var data []byte
		if enc != nil {
			var err error
			if data, err = e.AppendJSONTrustingRaw(buf[:0]); err != nil {
				p.stats.invalid.Add(1)
				p.log.Error("sip observer: an event could not be encoded; it is skipped",
					"type", string(e.Type), "provider_call_id", e.ProviderCallID, "error", err)
				continue
			}
			if cap(data) <= maxKeptEmitBuffer {
				buf = data
			}
		}
		backoff := 50 * time.Millisecond
		for {
			var err error
			if enc != nil {
				err = enc.EmitJSON(ctx, data)
			} else {
				err = p.out.Emit(ctx, e)
			}
			if err == nil {
				p.stats.emitted.Add(1)
				break
			}
			var invalid *event.ValidationError
			if errors.As(err, &invalid) {
				p.stats.invalid.Add(1)
				p.log.Error("sip observer: the agent refused an event as invalid; it is skipped",
					"type", string(e.Type), "provider_call_id", e.ProviderCallID, "error", err)
				break
			}
			p.stats.refused.Add(1)
			if ctx.Err() != nil {
				p.stats.lost.Add(1)
				p.log.Warn("sip observer: stopped before the agent took an event", "type", string(e.Type), "provider_call_id", e.ProviderCallID)
				break
			}
			p.log.Warn("sip observer: the agent did not take an event; retrying", "type", string(e.Type),
				"provider_call_id", e.ProviderCallID, "error", err, "retry_in", backoff.String())
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}
}

// maxKeptEmitBuffer bounds the encoding buffer each emitter keeps: an event with a large raw is
// encoded into a buffer of its own, which is then let go.
const maxKeptEmitBuffer = 64 << 10

// pipelineCounters is a snapshot of the pipeline's counters, as logged.
type pipelineCounters struct {
	Queued  uint64 `json:"queued"`  // messages handed to the call model
	Dropped uint64 `json:"dropped"` // messages dropped because the queue was full
	Emitted uint64 `json:"emitted"` // events the agent took
	Retried uint64 `json:"retried"` // attempts the agent did not take (retried)
	Invalid uint64 `json:"invalid"` // events the agent refused as invalid (skipped)
	Lost    uint64 `json:"lost"`    // events not handed over before the translator stopped
}

func (p *pipeline) snapshot() pipelineCounters {
	return pipelineCounters{
		Queued: p.stats.queued.Load(), Dropped: p.stats.dropped.Load(), Emitted: p.stats.emitted.Load(),
		Retried: p.stats.refused.Load(), Invalid: p.stats.invalid.Load(), Lost: p.stats.lost.Load(),
	}
}
