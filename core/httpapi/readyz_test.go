package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/callwire/callwire/core/httpapi"
)

// brokerState is a BrokerHealth with a fixed answer.
type brokerState bool

func (b brokerState) Up() bool { return bool(b) }

// shardedBroker is a ShardedBrokerHealth, up, with a fixed number of shards down.
type shardedBroker int

func (b shardedBroker) Up() bool        { return true }
func (b shardedBroker) ShardsDown() int { return int(b) }

func TestReadyz(t *testing.T) {
	tests := []struct {
		name    string
		ready   error
		broker  httpapi.BrokerHealth
		replica func(context.Context) error
		want    int
		checks  map[string]string // of the 200 body
	}{
		{name: "store ok, no broker to check", want: 200, checks: map[string]string{"store": "ok"}},
		{name: "store ok, broker up", broker: brokerState(true), want: 200, checks: map[string]string{"store": "ok", "broker": "ok"}},
		// Calls are still recorded while the broker is down: ready, with the broker degraded.
		{name: "store ok, broker down", broker: brokerState(false), want: 200, checks: map[string]string{"store": "ok", "broker": "degraded"}},
		// A cluster broker with a shard down misses the popups of that shard's organizations.
		{name: "store ok, cluster broker whole", broker: shardedBroker(0), want: 200, checks: map[string]string{"store": "ok", "broker": "ok"}},
		{name: "store ok, cluster broker with a shard down", broker: shardedBroker(1), want: 200,
			checks: map[string]string{"store": "ok", "broker": "degraded"}},
		// The replica's reads go to the primary while it is down: ready, with the replica degraded.
		{name: "store ok, replica up", replica: func(context.Context) error { return nil }, want: 200,
			checks: map[string]string{"store": "ok", "replica": "ok"}},
		{name: "store ok, replica down", replica: func(context.Context) error { return errors.New("down") }, want: 200,
			checks: map[string]string{"store": "ok", "replica": "degraded"}},
		{name: "store down, replica up", ready: errors.New("down"), replica: func(context.Context) error { return nil }, want: 503},
		{name: "store down", ready: errors.New("down"), broker: brokerState(true), want: 503},
		{name: "store and broker down", ready: errors.New("down"), broker: brokerState(false), want: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newStreamEnv(t, func(o *httpapi.Options) {
				o.Ready = func(context.Context) error { return tt.ready }
				o.Broker = tt.broker
				o.Replica = tt.replica
			})
			resp, err := http.Get(e.base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, raw)
			}
			if tt.want != 200 {
				if resp.Header.Get("Retry-After") == "" {
					t.Error("503 without Retry-After")
				}
				return
			}
			var body struct {
				Status string            `json:"status"`
				Checks map[string]string `json:"checks"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("body: %v: %s", err, raw)
			}
			if body.Status != "ready" || !reflect.DeepEqual(body.Checks, tt.checks) {
				t.Errorf("body %s, want status ready and checks %v", raw, tt.checks)
			}
		})
	}
}

// TestStreamBrokerDown: while the broker is known down the stream answers 503 with Retry-After
// and the failure body, without subscribing.
func TestStreamBrokerDown(t *testing.T) {
	e := newStreamEnv(t, func(o *httpapi.Options) { o.Broker = brokerState(false) })
	c := e.open(secretDesk, "")
	defer c.resp.Body.Close()
	if c.resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", c.resp.StatusCode)
	}
	if c.resp.Header.Get("Retry-After") == "" || c.resp.Header.Get(httpapi.TraceHeader) == "" {
		t.Errorf("headers %v, want Retry-After and %s", c.resp.Header, httpapi.TraceHeader)
	}
	var f struct {
		Success *bool  `json:"success"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(c.resp.Body).Decode(&f); err != nil || f.Success == nil || *f.Success ||
		f.Error != "503 Service Unavailable" || f.Message == "" {
		t.Errorf("not the failure body: %v %+v", err, f)
	}
	if subs := e.broker.all(); len(subs) != 0 {
		t.Errorf("%d subscriptions made while the broker is down", len(subs))
	}
	// A refused key is still refused first: the 503 says nothing to a caller without a key.
	if c := e.open("nope", ""); c.resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown key while the broker is down: %d, want 401", c.resp.StatusCode)
	}
}
