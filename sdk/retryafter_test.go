package sdk_test

import (
	"errors"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/sdktest"
)

func TestErrorCarriesRetryAfter(t *testing.T) {
	s := sdktest.NewServer(t)
	c, err := sdk.New(s.URL, s.Credential(), sdk.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := event.New(event.CallEnded, "p1", time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC), event.Call{Direction: event.Inbound})
	s.FailNext(1, 503, 3*time.Second)
	_, err = c.SendOne(t.Context(), e)
	var se *sdk.Error
	if !errors.As(err, &se) || se.Status != 503 || se.RetryAfter != 3*time.Second {
		t.Fatalf("503: %#v", err)
	}
	s.FailNext(1, 500, 0)
	_, err = c.SendOne(t.Context(), e)
	if !errors.As(err, &se) || se.Status != 500 || se.RetryAfter != 0 {
		t.Fatalf("500: %#v", err)
	}
}
