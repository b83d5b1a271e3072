package sdktest_test

import (
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/sdktest"
)

func TestFakeServerBehavesLikeTheEndpoint(t *testing.T) {
	s := sdktest.NewServer(t)
	c := s.Client(t)
	at := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	ring := event.New(event.CallReceived, "p1", at, event.Call{Direction: event.Inbound, From: event.E164("+442071234567")})
	r, err := c.SendOne(t.Context(), ring)
	if err != nil || r.Status != 201 || !r.Calls[0].Created {
		t.Fatalf("first: %+v %v", r, err)
	}
	r, err = c.SendOne(t.Context(), ring)
	if err != nil || r.Status != 200 || !r.Events[0].Duplicate {
		t.Fatalf("retry: %+v %v", r, err)
	}
	s.FailNext(2, 503, 0)
	end := event.New(event.CallEnded, "p1", at, event.Call{Direction: event.Inbound})
	end.Sequence = 1
	if _, err := c.SendOne(t.Context(), end); err != nil {
		t.Fatalf("after two 503s the client should have got through: %v", err)
	}
	if got := s.Events(); len(got) != 2 || got[1].Type != event.CallEnded {
		t.Errorf("events %+v", got)
	}
	if s.Requests() != 5 {
		t.Errorf("requests %d, want 5", s.Requests())
	}
	if len(s.Bodies()) != 2 {
		t.Errorf("bodies %d", len(s.Bodies()))
	}
}
