package ringcentral

import (
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// TestTransferTarget checks that call_transferred names the party the call went to, taken from
// the first party that joins after the transfer, and is still told when no target shows.
func TestTransferTarget(t *testing.T) {
	t0 := time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)
	caller := endpoint{PhoneNumber: "+16505550123", Name: "WIRELESS CALLER"}
	desk := endpoint{PhoneNumber: "+16505550100", ExtensionNumber: "101", Name: "Front Desk"}
	party := func(id, dir, code, reason string, from, to endpoint) eventParty {
		p := eventParty{ID: id, Direction: dir, From: from, To: to}
		p.Status.Code, p.Status.Reason = code, reason
		return p
	}
	note := func(seq int64, ps ...eventParty) sessionEvent {
		return sessionEvent{Sequence: seq, TelephonySessionID: "s-1", at: t0.Add(time.Duration(seq) * time.Second), Parties: ps}
	}
	start := []sessionEvent{
		note(1, party("p-1", "Inbound", statusProceeding, "", caller, desk)),
		note(2, party("p-1", "Inbound", statusAnswered, "", caller, desk)),
	}
	for _, tc := range []struct {
		name     string
		notes    []sessionEvent
		mode     event.TransferMode
		to       string // partyText of the target, "-" for none
		at, seqs int64
	}{
		{"blind to an extension, target in a later notification", []sessionEvent{
			note(3, party("p-1", "Inbound", statusDisconn, "BlindTransfer", caller, desk)),
			note(4, party("p-2", "Inbound", statusProceeding, "", caller, endpoint{PhoneNumber: "+16505550100", ExtensionNumber: "102", Name: "Dr Smith"})),
			note(5, party("p-2", "Inbound", statusDisconn, "", caller, endpoint{ExtensionNumber: "102"})),
		}, event.TransferBlind, "extension:/ext102", 3, 3},
		{"attended, target in the same notification", []sessionEvent{
			note(3, party("p-1", "Inbound", statusGone, "AttendedTransfer", caller, desk),
				party("p-3", "Inbound", statusAnswered, "", caller, endpoint{ExtensionNumber: "103", Name: "Nurse"})),
			note(4, party("p-3", "Inbound", statusDisconn, "", caller, endpoint{ExtensionNumber: "103"})),
		}, event.TransferAttended, "extension:/ext103", 3, 3},
		{"attended, target listed before the transferring party", []sessionEvent{
			note(3, party("p-3", "Inbound", statusAnswered, "", caller, endpoint{ExtensionNumber: "103", Name: "Nurse"}),
				party("p-1", "Inbound", statusGone, "AttendedTransfer", caller, desk)),
			note(4, party("p-3", "Inbound", statusDisconn, "", caller, endpoint{ExtensionNumber: "103"})),
		}, event.TransferAttended, "extension:/ext103", 3, 3},
		{"blind to an outside number", []sessionEvent{
			note(3, party("p-1", "Inbound", statusDisconn, "BlindTransfer", caller, desk)),
			note(4, party("p-4", "Outbound", statusSetup, "", endpoint{PhoneNumber: "+16505550100"}, endpoint{PhoneNumber: "+16505550188"})),
			note(5, party("p-4", "Outbound", statusDisconn, "", endpoint{PhoneNumber: "+16505550100"}, endpoint{PhoneNumber: "+16505550188"})),
		}, event.TransferBlind, "e164:+16505550188", 3, 3},
		{"target never shows", []sessionEvent{
			note(3, party("p-1", "Inbound", statusDisconn, "BlindTransfer", caller, desk)),
			note(4, party("p-9", "", statusDisconn, "", caller, desk)),
		}, event.TransferBlind, "-", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
			var transfers []event.Event
			ended := false
			for _, n := range append(append([]sessionEvent(nil), start...), tc.notes...) {
				for _, e := range cs.observe(n, nil, t0) {
					if err := e.Validate(); err != nil {
						t.Errorf("invalid %s: %v", e.Type, err)
					}
					switch e.Type {
					case event.CallTransferred:
						if ended {
							t.Error("call_transferred after call_ended")
						}
						transfers = append(transfers, e)
					case event.CallEnded:
						ended = true
					}
				}
			}
			if len(transfers) != 1 {
				t.Fatalf("%d call_transferred, want 1", len(transfers))
			}
			e := transfers[0]
			if got := partyText(e.TransferTo); got != tc.to {
				t.Errorf("to = %s, want %s", got, tc.to)
			}
			if e.Mode != tc.mode {
				t.Errorf("mode = %s, want %s", e.Mode, tc.mode)
			}
			if want := t0.Add(time.Duration(tc.at) * time.Second); !e.OccurredAt.Equal(want) || e.Sequence != tc.seqs {
				t.Errorf("at %s seq %d, want the transfer's %s seq %d", e.OccurredAt, e.Sequence, want, tc.seqs)
			}
			if !ended {
				t.Error("the call did not end")
			}
		})
	}
}
