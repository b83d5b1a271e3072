package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/server"
)

// TestShutdownLogsWhatItWaitedFor shuts a server down with a popup stream open and checks the
// two lines: what it is about to wait for, then what it waited for and how it ended.
func TestShutdownLogsWhatItWaitedFor(t *testing.T) {
	st := openStore(t, backends()[0])
	logs := &syncBuffer{}
	cfg := config.Defaults()
	cfg.Popups.Heartbeat = streamHeartbeat
	srv, e := replica(t, st, cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))}, "", "", "")
	deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
	desk := e.stream(deskID, deskSecret, "?locations=front")
	if desk.status != http.StatusOK {
		t.Fatalf("stream answered %d: %s", desk.status, desk.body)
	}
	e.client.CloseIdleConnections()

	sctx, cancel := context.WithTimeout(t.Context(), config.Defaults().Server.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}

	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		msg, _ := m["msg"].(string)
		if _, seen := lines[msg]; !seen && strings.HasPrefix(msg, "shut") {
			lines[msg] = m
		}
	}
	begin := lines["shutting down: ending popup streams, waiting for requests in flight"]
	if begin == nil || begin["popup_streams"] != 1.0 || begin["requests_in_flight"] != 0.0 || begin["timeout"] == nil || begin["open_connections"] == nil {
		t.Errorf("start line %v, want one open popup stream, no request in flight, a timeout and the open connections; log:\n%s", begin, logs)
	}
	done := lines["shut down"]
	if done == nil || done["popup_streams_ended"] != 1.0 || done["waited_for_requests"] != 0.0 || done["broker"] != "closed" || done["duration_ms"] == nil {
		t.Errorf("done line %v, want one stream ended, the broker closed and the duration; log:\n%s", done, logs)
	}
}
