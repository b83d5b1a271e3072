package asterisk

import (
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/asterisk/ami"
)

// Legs that move between calls: a Linkedid that changes, a pickup, a blind or attended transfer,
// and the Local channels a transfer is seen through.

// move takes leg l into call to (its Linkedid changed); a call left without legs ends.
func (t *Tracker) move(l *leg, to *call, at time.Time) []event.Event {
	from := l.call
	delete(from.legs, l.uid)
	l.call = to
	to.legs[l.uid] = l
	if len(from.legs) == 0 {
		return t.merge(from, to, at)
	}
	return nil
}

// merge ends call from, whose channels now belong to call to.
func (t *Tracker) merge(from, to *call, at time.Time) []event.Event {
	for uid, l := range from.legs {
		l.call = to
		to.legs[uid] = l
	}
	from.legs = map[string]*leg{}
	for a, target := range t.alias {
		if target == from.id {
			t.alias[a] = to.id
		}
	}
	out := t.end(from, at)
	t.alias[from.id] = to.id
	return out
}

// pickup handles a phone picking up another's ringing call (a pickup code, or a BLF key): the
// picking phone's channel joins the ringing call and answers it. Its own call, begun by
// dialling the pickup code, was never a call of its own and is forgotten without a word.
func (t *Tracker) pickup(m ami.Message, at time.Time) []event.Event {
	var out []event.Event
	p := t.legOf(m, "", at, &out)
	target := t.legOf(m, "Target", at, &out)
	if p == nil || target == nil || p.kind == kindPlumbing {
		return out
	}
	c := target.call
	out = append(out, t.join(p, c, at)...)
	if p.answered {
		return out
	}
	out = append(out, t.start(c, target, at)...)
	p.answered = true
	if !c.answered {
		c.answered, c.answeredAt = true, at
	}
	c.answerShown = true
	e := t.emit(c, event.CallAnswered, at, c.id+"/answered/"+p.uid)
	if p.kind == kindPhone {
		e.AnsweredBy = t.extension(p)
	}
	return append(out, e)
}

// join takes leg p into call c: p was picked up or dialled from c, so it is one of c's channels
// whatever its Linkedid says. The call p leaves, left without channels, is forgotten without a
// word when it never reported anything (a phone that dialled a pickup code, or was sent into c
// by the PBX: it was never a call of its own), and otherwise ends as a merged call does.
func (t *Tracker) join(p *leg, c *call, at time.Time) []event.Event {
	old := p.call
	if old == c {
		return nil
	}
	delete(old.legs, p.uid)
	p.call = c
	c.legs[p.uid] = p
	if old.origin == p {
		old.origin = nil
	}
	switch {
	case len(old.legs) > 0:
		return nil
	case !old.started:
		delete(t.calls, old.id)
		t.alias[old.id] = c.id
		for a, to := range t.alias {
			if to == old.id {
				t.alias[a] = c.id
			}
		}
		return nil
	}
	return t.merge(old, c, at)
}

func (t *Tracker) blindTransfer(m ami.Message, at time.Time) []event.Event {
	if !strings.EqualFold(m.Get("Result"), "Success") && m.Get("Result") != "" {
		return nil
	}
	var out []event.Event
	l := t.legOf(m, "Transferee", at, &out)
	if l == nil {
		l = t.legOf(m, "Transferer", at, &out)
	}
	if l == nil {
		return out
	}
	c := l.call
	c.transfers++
	c.answerShown = false
	out = append(out, t.start(c, nil, at)...)
	e := t.emit(c, event.CallTransferred, at, c.id+"/transferred/"+strconv.Itoa(c.transfers))
	e.Mode = event.TransferBlind
	to := t.cfg.Plan.Classify(m.Get("Extension"), "")
	e.TransferTo = &to
	return append(out, e)
}

func (t *Tracker) attendedTransfer(m ami.Message, at time.Time) []event.Event {
	if !strings.EqualFold(m.Get("Result"), "Success") && m.Get("Result") != "" {
		return nil
	}
	var out []event.Event
	orig := t.legOf(m, "OrigTransferer", at, &out)
	second := t.legOf(m, "SecondTransferer", at, &out)
	if orig == nil {
		return out
	}
	c := orig.call
	c.transfers++
	c.answerShown = false
	out = append(out, t.start(c, nil, at)...)
	e := t.emit(c, event.CallTransferred, at, c.id+"/transferred/"+strconv.Itoa(c.transfers))
	e.Mode = event.TransferAttended
	var target *leg
	if tt := t.legOf(m, "TransferTarget", at, &out); tt != nil && tt.kind != kindPlumbing {
		target = tt
	} else if tt != nil {
		target = t.throughLocal(tt)
	}
	if second != nil && second.call != c {
		consult := second.call
		if target == nil {
			for _, l := range consult.legs {
				if l != second && l.kind != kindPlumbing && (target == nil || l.uid < target.uid) {
					target = l
				}
			}
		}
		// The consultation call's channels now belong to the transferred call.
		out = append(out, t.merge(consult, c, at)...)
	}
	// The transfer joins the held party to the target: whatever the transferer held resumes.
	// Asterisk sends a Hold for the transferer of an attended transfer and never an Unhold.
	var held []*leg
	for _, l := range c.legs {
		if l.hold == holdOn {
			held = append(held, l)
		}
	}
	sortLegs(held)
	for _, l := range held {
		out = append(out, t.hold(l, true, at)...)
	}
	if target != nil {
		var to event.Party
		if target.kind == kindPhone {
			to = event.Party{Kind: event.KindExtension, Extension: t.extension(target)}
		} else {
			to = t.cfg.Plan.Classify(target.cidNum, target.cidName)
		}
		e.TransferTo = &to
	}
	// The transfer event goes after the consultation call's end, but before anything of c.
	return append(out, e)
}

// throughLocal returns the phone or trunk channel a Local channel leads to, or nil: the
// transfer feature's target is `Local/203@ctx-…;1`, whose other half (`;2`) dialled the phone.
// It follows at most a few Local hops, and prefers a channel that answered, then the lowest
// Uniqueid, so that the answer does not depend on map order.
func (t *Tracker) throughLocal(l *leg) *leg {
	for range 4 {
		half, ok := strings.CutSuffix(l.name, ";1")
		if !ok || !strings.HasPrefix(strings.ToLower(l.name), "local/") {
			return nil
		}
		var two *leg
		for _, o := range t.legs {
			if o.name == half+";2" {
				two = o
				break
			}
		}
		if two == nil {
			return nil
		}
		var best, local *leg
		for _, o := range t.legs {
			if o.dialer != two {
				continue
			}
			if o.kind == kindPlumbing {
				if local == nil || o.uid < local.uid {
					local = o
				}
				continue
			}
			if best == nil || preferTarget(o, best) {
				best = o
			}
		}
		if best != nil || local == nil {
			return best
		}
		l = local
	}
	return nil
}

// preferTarget reports whether a is a better transfer target than b: one that answered (Up)
// over one that did not, then the lower Uniqueid.
func preferTarget(a, b *leg) bool {
	if au, bu := a.state == stateUp, b.state == stateUp; au != bu {
		return au
	}
	return a.uid < b.uid
}
