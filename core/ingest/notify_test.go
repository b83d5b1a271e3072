package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/metrictest"
)

// callbackWriter is a recorder whose writes say the to-call-back list changed through every
// call whose provider call id starts with "cb".
type callbackWriter struct {
	*recorder
}

func (w callbackWriter) WriteCalls(ctx context.Context, wr store.Write) ([]store.CallResult, error) {
	out, err := w.recorder.WriteCalls(ctx, wr)
	for i := range out {
		out[i].CallbacksChanged = strings.HasPrefix(wr.Calls[i].ProviderCallID, "cb")
	}
	return out, err
}

// noticeRecorder is a Notifier that keeps the organizations it was told about, and whether each
// notice had a deadline.
type noticeRecorder struct {
	mu        sync.Mutex
	orgs      []string
	deadlines []bool
	err       error
	waits     bool
}

func (n *noticeRecorder) NotifyCallbacks(ctx context.Context, orgID string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, dl := ctx.Deadline()
	n.orgs = append(n.orgs, orgID)
	n.deadlines = append(n.deadlines, dl)
	return n.err
}

func (n *noticeRecorder) MayWait(context.Context, string) bool { return n.waits }

func TestCallbackNotices(t *testing.T) {
	tests := []struct {
		name          string
		body          string
		writeErr      error
		notifyErr     error
		waits         bool
		wantNotices   int
		wantPublished float64
		wantFailed    float64
	}{
		{"a write that cannot change the list sends none", ev("call_received", "plain", 1, t0, ""), nil, nil, false, 0, 0, 0},
		{"a write that may have sends one", ev("call_missed", "cb-1", 2, t0, ""), nil, nil, false, 1, 1, 0},
		{"one per write however many calls", batch(ev("call_missed", "cb-1", 2, t0, ""), ev("call_ended", "cb-2", 2, t0, ""),
			ev("call_received", "plain", 1, t0, "")), nil, nil, false, 1, 1, 0},
		{"a failed write sends none", ev("call_missed", "cb-1", 2, t0, ""), store.ErrUnavailable, nil, false, 0, 0, 0},
		{"a failed notice fails nothing", ev("call_missed", "cb-1", 2, t0, ""), nil, errors.New("broker down"), false, 1, 0, 1},
		{"a notifier that may wait gets the publish timeout", ev("call_missed", "cb-1", 2, t0, ""), nil, nil, true, 1, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			r.writeErr = tc.writeErr
			n := &noticeRecorder{err: tc.notifyErr, waits: tc.waits}
			reg := prometheus.NewRegistry()
			s, err := New(Options{Writer: callbackWriter{r}, Publisher: r, Notifier: n, Registerer: reg,
				PublishTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Ingest(t.Context(), "org-1", "trace-1", parse(t, tc.body), nil)
			if (err != nil) != (tc.writeErr != nil) {
				t.Fatalf("Ingest: %v, want error %v", err, tc.writeErr)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if len(n.orgs) != tc.wantNotices {
				t.Fatalf("%d notices %v, want %d", len(n.orgs), n.orgs, tc.wantNotices)
			}
			for i, org := range n.orgs {
				if org != "org-1" {
					t.Errorf("notice for %q, want org-1", org)
				}
				if n.deadlines[i] != tc.waits {
					t.Errorf("notice had a deadline: %v, want %v", n.deadlines[i], tc.waits)
				}
			}
			if got := metrictest.Sum(t, reg, "callwire_callback_notices_total", "outcome", "published"); got != tc.wantPublished {
				t.Errorf("published notices counted %v, want %v", got, tc.wantPublished)
			}
			if got := metrictest.Sum(t, reg, "callwire_callback_notices_total", "outcome", "failed"); got != tc.wantFailed {
				t.Errorf("failed notices counted %v, want %v", got, tc.wantFailed)
			}
		})
	}
}
