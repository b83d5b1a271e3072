package asterisk

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/asterisk/ami"
)

// Catching up with the PBX after a gap: a CoreShowChannels list read after a reconnect (Resync)
// or periodically (Sweep) settles the channels that changed while nothing was heard.

// Resync rebuilds the view from a CoreShowChannels list taken at at: channels the Tracker
// knows that are no longer up hung up while it was not listening (their calls end, as of at);
// channels it does not know are taken in, and what they show (ringing, answered) is reported
// with the same ids as if it had been seen live.
func (t *Tracker) Resync(channels []ami.Message, at time.Time) []event.Event {
	t.stats.Resyncs++
	up := make(map[string]bool, len(channels))
	for _, m := range channels {
		up[m.Get("Uniqueid")] = true
	}
	var out []event.Event
	var gone []*leg
	for uid, l := range t.legs {
		if !up[uid] {
			gone = append(gone, l)
		}
	}
	sortLegs(gone)
	for _, l := range gone {
		if _, still := t.legs[l.uid]; still {
			out = append(out, t.drop(l, at)...)
		}
	}
	// Originating channels first, so that each call's origin is known before its other legs.
	ordered := make([]ami.Message, 0, len(channels))
	for _, m := range channels {
		if m.Get("Uniqueid") == m.Get("Linkedid") {
			ordered = append(ordered, m)
		}
	}
	for _, m := range channels {
		if m.Get("Uniqueid") != m.Get("Linkedid") {
			ordered = append(ordered, m)
		}
	}
	for _, m := range ordered {
		if _, known := t.legs[m.Get("Uniqueid")]; known {
			continue
		}
		l := t.legOf(m, "", at, &out)
		if l == nil {
			continue
		}
		if l.call.started || len(l.call.legs) == 1 {
			if s := linkedStart(l.call.id); !s.IsZero() && s.Before(l.call.startedAt) {
				l.call.startedAt = s
			}
		}
		t.update(l, m, "")
		if strings.EqualFold(m.Get("Application"), "VoiceMail") {
			l.call.voicemail = true
		}
		out = append(out, t.stateChanged(l, at)...)
	}
	t.stats.Emitted += int64(len(out))
	return out
}

// validID reports whether a Uniqueid or Linkedid can become part of an event's ids: short
// enough, valid UTF-8, no control characters.
func validID(s string) bool {
	if len(s) > event.MaxIDLength/2 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// Sweep checks the Tracker's channels against a CoreShowChannels list taken at at, while
// connected: a channel absent from two lists in a row hung up without its Hangup being seen
// (it cannot have been in flight for a whole interval), and is dropped; a call left without
// channels ends. Channels in the list that the Tracker does not know are left to their events.
func (t *Tracker) Sweep(channels []ami.Message, at time.Time) []event.Event {
	up := make(map[string]bool, len(channels))
	for _, m := range channels {
		up[m.Get("Uniqueid")] = true
	}
	var gone []*leg
	for uid, l := range t.legs {
		switch {
		case up[uid]:
			l.missing = false
		case l.missing:
			gone = append(gone, l)
		default:
			l.missing = true
		}
	}
	sortLegs(gone)
	var out []event.Event
	for _, l := range gone {
		if _, still := t.legs[l.uid]; still {
			out = append(out, t.drop(l, at)...)
		}
	}
	t.stats.Swept += int64(len(gone))
	t.stats.Emitted += int64(len(out))
	return out
}

// linkedStart reads the creation time Asterisk writes in a Uniqueid ("[system-]1529936598.168":
// seconds since 1970, then a counter).
func linkedStart(uid string) time.Time {
	if i := strings.LastIndexByte(uid, '-'); i >= 0 {
		uid = uid[i+1:]
	}
	if i := strings.IndexByte(uid, '.'); i > 0 {
		uid = uid[:i]
	}
	n, err := strconv.ParseInt(uid, 10, 64)
	if err != nil || n < 1e9 || n > 1e11 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}
