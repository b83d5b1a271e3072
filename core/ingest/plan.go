package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// StateOf returns the state an event type moves a call to, and false for the types that happen
// during a state and never move it (hold, transfer, recording, transcription).
func StateOf(t event.Type) (store.State, bool) {
	switch t {
	case event.CallReceived, event.CallPlaced:
		return store.StateRinging, true
	case event.CallAnswered:
		return store.StateAnswered, true
	case event.CallEnded, event.CallMissed:
		return store.StateEnded, true
	}
	return store.StateUnknown, false
}

// CallID returns the identifier of the call filed under org, provider and providerCallID. It is
// derived from the key, so every replica and every racing request agrees on it before anything is
// stored, and the popup can name the call before it is persisted.
func CallID(orgID, provider, providerCallID string) string {
	h := sha256.New()
	for _, s := range []string{orgID, provider, providerCallID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	// Shaped as a UUID (version 8, RFC 9562 variant) so that it reads like the other ids.
	sum[6] = sum[6]&0x0f | 0x80
	sum[8] = sum[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[0:8], sum[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], sum[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], sum[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], sum[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], sum[10:16])
	return string(b[:])
}

// plannedCall is one call's share of a request: the write to make and how its results map back
// to the request's events.
type plannedCall struct {
	write store.CallWrite
	// unique[i] is the request index of write.Events[i].
	unique []int
	// slot maps a request index to its position in write.Events; a later event with the same
	// dedupe key maps to the earlier one's position.
	slot map[int]int
	// received is the request index of the call's first call_received in order, or -1.
	received int
}

// plan groups events by call, clamps future timestamps to now for ordering, sorts each call's
// events by sequence and then clock (request order breaking ties), drops repeats of a dedupe key
// within the request, and computes the state each call climbs to. Calls come in the order they
// first appear in the request; the returned writes are ready for the store except for Clients.
func plan(orgID string, events []event.Parsed, now time.Time, newID func() string) []*plannedCall {
	type key struct{ provider, callID string }
	byKey := map[key]*plannedCall{}
	var calls []*plannedCall
	members := map[*plannedCall][]int{}
	for i := range events {
		e := &events[i].Event
		k := key{e.EffectiveProvider(), e.ProviderCallID}
		pc := byKey[k]
		if pc == nil {
			pc = &plannedCall{received: -1, slot: map[int]int{}}
			pc.write.Provider = k.provider
			pc.write.ProviderCallID = k.callID
			pc.write.ID = CallID(orgID, k.provider, k.callID)
			byKey[k] = pc
			calls = append(calls, pc)
		}
		members[pc] = append(members[pc], i)
	}
	orderAt := func(i int) time.Time {
		t := events[i].Event.OccurredAt
		if t.After(now) {
			return now
		}
		return t
	}
	for _, pc := range calls {
		idx := members[pc]
		sort.SliceStable(idx, func(a, b int) bool {
			ea, eb := &events[idx[a]].Event, &events[idx[b]].Event
			if ea.Sequence != eb.Sequence {
				return ea.Sequence < eb.Sequence
			}
			return orderAt(idx[a]).Before(orderAt(idx[b]))
		})
		w := &pc.write
		w.Events = make([]store.EventWrite, 0, len(idx))
		pc.unique = make([]int, 0, len(idx))
		for n, i := range idx {
			e := &events[i].Event
			at := orderAt(i)
			if n == 0 || at.Before(w.FirstAt) {
				w.FirstAt = at
			}
			if n == 0 || at.After(w.LastAt) {
				w.LastAt = at
			}
			if s, moves := StateOf(e.Type); moves && s > w.State {
				w.State = s
			}
			dk := e.DedupeKey()
			// A request holds at most event.MaxBatch events: a scan of the call's kept ones is
			// cheaper than a map.
			if pos := keptAt(w.Events, dk); pos >= 0 {
				pc.slot[i] = pos
				continue
			}
			pc.slot[i] = len(w.Events)
			pc.unique = append(pc.unique, i)
			if e.Type == event.CallReceived && pc.received < 0 {
				pc.received = i
			}
			w.Events = append(w.Events, store.EventWrite{
				ID:              newID(),
				Type:            string(e.Type),
				DedupeKey:       dk,
				Sequence:        e.Sequence,
				ProviderEventID: e.ProviderEventID,
				OccurredAt:      e.OccurredAt,
				OrderAt:         at,
				Body:            events[i].Body,
			})
		}
		last := idx[len(idx)-1]
		w.Block = events[last].Block
		w.BlockSequence = events[last].Event.Sequence
		w.BlockAt = orderAt(last)
		w.Direction = string(events[last].Event.Call.Direction)
	}
	return calls
}

// keptAt returns the position of the event with dedupe key dk among events, or -1.
func keptAt(events []store.EventWrite, dk string) int {
	for pos := range events {
		if events[pos].DedupeKey == dk {
			return pos
		}
	}
	return -1
}
