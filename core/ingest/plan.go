package ingest

import (
	"cmp"
	"encoding/json"
	"slices"
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

// dedupeKeys returns each event's Event.DedupeKey, all of them cut from one string, in out
// (grown to hold them).
func dedupeKeys(out []string, events []event.Parsed) []string {
	out = slices.Grow(out[:0], len(events))[:len(events)]
	size := 0
	for i := range events {
		e := &events[i].Event
		size += len(e.ProviderEventID) + len(e.Type) + 21
	}
	// A report's few keys are made on the stack; a batch's in one allocation.
	var bufArr [256]byte
	var endsArr [8]int
	buf, ends := bufArr[:0], endsArr[:0]
	if size > len(bufArr) {
		buf = make([]byte, 0, size)
	}
	if len(events) > len(endsArr) {
		ends = make([]int, 0, len(events))
	}
	for i := range events {
		buf = events[i].Event.AppendDedupeKey(buf)
		ends = append(ends, len(buf))
	}
	all, start := string(buf), 0
	for i, end := range ends {
		out[i], start = all[start:end], end
	}
	return out
}

// plannedCall is one call's share of a request: the write to make and how its results map back
// to the request's events.
type plannedCall struct {
	write store.CallWrite
	// members are the request indices of the call's events, in the order of the call.
	members []int
	// unique[i] is the request index of write.Events[i].
	unique []int
	// slots, shared by the request's calls, maps a request index to its position in its call's
	// write.Events; a later event with the same dedupe key maps to the earlier one's position.
	slots []int
	// received is the request index of the call's first call_received in order, or -1.
	received int
}

// callKey is the key a call is filed under, beside its organization.
type callKey struct{ provider, callID string }

// planMemory is the memory plan builds a request's calls in, which a Service keeps for the next
// request (Service.plans): under batches, allocating it for every request was a fifth of the
// bytes the server allocated. Its slices grow to the largest request's, which event.MaxBatch
// bounds.
type planMemory struct {
	callOf, members, slots, unique []int
	keys                           []callKey
	byKey                          map[callKey]int
	planned                        []plannedCall
	calls                          []*plannedCall
	writes                         []store.EventWrite
	dks                            []string
	callWrites                     []store.CallWrite // the store.Write's calls (Ingest)
	ringing                        []*plannedCall    // the calls that ring, and their refs (ring)
	refs                           []store.EventRef
	asks                           []*lookupAsk // the lookups started before the read (ring)
}

// forget clears what m holds of the last request (it points into the request's events), keeping
// m's room.
func (m *planMemory) forget() {
	clear(m.keys[:cap(m.keys)])
	clear(m.byKey)
	clear(m.planned[:cap(m.planned)])
	clear(m.calls[:cap(m.calls)])
	clear(m.writes[:cap(m.writes)])
	clear(m.dks[:cap(m.dks)])
	clear(m.callWrites[:cap(m.callWrites)])
	clear(m.ringing[:cap(m.ringing)])
	clear(m.refs[:cap(m.refs)])
	clear(m.asks[:cap(m.asks)])
}

// plan groups events by call, clamps future timestamps to now for ordering, sorts each call's
// events by sequence and then clock (request order breaking ties), drops repeats of a dedupe key
// within the request, and computes the state each call climbs to. Calls come in the order they
// first appear in the request; the returned writes are ready for the store except for Clients.
//
// The calls and what they hold are built in m, which must not be used for another request while
// they are in use; their strings are their own.
func plan(events []event.Parsed, now time.Time, newID func() string, m *planMemory) []*plannedCall {
	n := len(events)
	// Each event's call, as the index of the call's first appearance in keys.
	callOf := slices.Grow(m.callOf[:0], n)[:n]
	keys := m.keys[:0]
	if m.byKey == nil {
		m.byKey = make(map[callKey]int)
	}
	byKey := m.byKey
	for i := range events {
		e := &events[i].Event
		k := callKey{e.EffectiveProvider(), e.ProviderCallID}
		c, ok := byKey[k]
		if !ok {
			c = len(keys)
			keys = append(keys, k)
			byKey[k] = c
		}
		callOf[i] = c
	}
	orderAt := func(i int) time.Time {
		t := events[i].Event.OccurredAt
		if t.After(now) {
			return now
		}
		return t
	}
	// The events' dedupe keys.
	dks := dedupeKeys(m.dks, events)
	// The request indices grouped by call, each call's in its order: by sequence, then clock,
	// then request order (the sort is stable).
	members := slices.Grow(m.members[:0], n)[:n]
	for i := range members {
		members[i] = i
	}
	slices.SortStableFunc(members, func(a, b int) int {
		ea, eb := &events[a].Event, &events[b].Event
		return cmp.Or(cmp.Compare(callOf[a], callOf[b]), cmp.Compare(ea.Sequence, eb.Sequence),
			orderAt(a).Compare(orderAt(b)))
	})
	planned := slices.Grow(m.planned[:0], len(keys))[:len(keys)]
	clear(planned)
	calls := slices.Grow(m.calls[:0], len(keys))[:len(keys)]
	slots := slices.Grow(m.slots[:0], n)[:n]
	unique := slices.Grow(m.unique[:0], n)
	writes := slices.Grow(m.writes[:0], n)
	m.callOf, m.keys, m.dks, m.members = callOf, keys, dks, members
	m.planned, m.calls, m.slots, m.unique, m.writes = planned, calls, slots, unique, writes
	from := 0
	for c, k := range keys {
		pc := &planned[c]
		calls[c] = pc
		to := from
		for to < n && callOf[members[to]] == c {
			to++
		}
		idx := members[from:to:to]
		from = to
		pc.members, pc.slots, pc.received = idx, slots, -1
		w := &pc.write
		w.Provider, w.ProviderCallID = k.provider, k.callID
		firstWrite, firstUnique := len(writes), len(unique)
		for m, i := range idx {
			e := &events[i].Event
			at := orderAt(i)
			if m == 0 || at.Before(w.FirstAt) {
				w.FirstAt = at
			}
			if m == 0 || at.After(w.LastAt) {
				w.LastAt = at
			}
			if s, moves := StateOf(e.Type); moves && s > w.State {
				w.State = s
			}
			summarize(&w.Summary, e, at)
			dk := dks[i]
			// A request holds at most event.MaxBatch events: a scan of the call's kept ones is
			// cheaper than a map.
			if pos := keptAt(writes[firstWrite:], dk); pos >= 0 {
				slots[i] = pos
				continue
			}
			slots[i] = len(writes) - firstWrite
			unique = append(unique, i)
			if e.Type == event.CallReceived && pc.received < 0 {
				pc.received = i
			}
			writes = append(writes, store.EventWrite{
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
		// Capped, so that appending to one call's share cannot write into the next one's.
		w.Events = writes[firstWrite:len(writes):len(writes)]
		pc.unique = unique[firstUnique:len(unique):len(unique)]
		last := idx[len(idx)-1]
		w.Block = events[last].Block
		w.BlockSequence = events[last].Event.Sequence
		w.BlockAt = orderAt(last)
		w.Direction = string(events[last].Event.Call.Direction)
		describeBlock(&w.Summary, &events[last].Event)
	}
	return calls
}

// summarize folds what e, ordered at at, says toward its call's history row into s: the rules
// are store.Summary's, so that a write's summary is the merge of its events'.
func summarize(s *store.Summary, e *event.Event, at time.Time) {
	switch e.Type {
	case event.CallAnswered:
		s.Flags |= store.FlagAnswered
		if s.AnsweredAt.IsZero() || at.Before(s.AnsweredAt) {
			s.AnsweredAt, s.AnsweredBy = at, e.AnsweredBy
		}
	case event.CallEnded, event.CallMissed:
		if s.EndedAt.IsZero() || at.Before(s.EndedAt) {
			s.EndedAt = at
		}
		switch {
		case e.Disposition == event.DispositionVoicemail:
			s.Flags |= store.FlagVoicemail
		case e.Disposition == event.DispositionAnswered,
			e.TalkTime != nil && *e.TalkTime > 0,
			e.AnsweredElsewhere != nil && *e.AnsweredElsewhere:
			s.Flags |= store.FlagAnswered
		}
	case event.CallRecorded:
		s.Flags |= store.FlagRecorded
	case event.CallTranscribed:
		s.Flags |= store.FlagTranscribed
	}
}

// describeBlock sets the parts of s that describe the call block of e, the write's latest event.
func describeBlock(s *store.Summary, e *event.Event) {
	s.FromKey, s.ToKey, s.FromExt, s.ToExt = "", "", "", ""
	if p := e.Call.From; p != nil {
		s.FromKey, s.FromExt = store.NumberKey(p.Number), p.Extension
	}
	if p := e.Call.To; p != nil {
		s.ToKey, s.ToExt = store.NumberKey(p.Number), p.Extension
	}
	// Locations are validated strings; encoding them cannot fail.
	s.Locations, _ = json.Marshal(e.EffectiveLocations())
	s.Callback = ""
	p := e.Call.To
	if e.Call.Direction == event.Inbound {
		p = e.Call.From
	}
	if p != nil {
		s.Callback, _ = store.CallbackPartyNumber(string(p.Kind), p.Number, p.URI, p.Name)
	}
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
