package httpapi

import (
	"bufio"
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/history"
)

// CallsPath is the call history's list; CallsPath + "/{id}" is one call with its events.
const CallsPath = "/api/v1/calls"

// History answers the call history's reads (core/history.Service).
type History interface {
	Prepare(ctx context.Context, orgID string, params url.Values, forCSV bool) (history.Query, error)
	Page(ctx context.Context, q history.Query) (history.Page, error)
	Call(ctx context.Context, orgID, id string) (history.Item, error)
	Export(ctx context.Context, q history.Query) (*history.Export, error)
	// Callbacks reads a page of the to-call-back list; Dismiss closes an item by hand.
	Callbacks(ctx context.Context, orgID string, params url.Values) (history.CallbackPage, error)
	Dismiss(ctx context.Context, orgID, number, extension string, at time.Time) (history.CallbackItem, error)
}

// readPrincipal authenticates a history request: a federated key holding org.calls.read. A key
// read is not cached: nothing the store runs for a read carries a key check.
func (a *api) readPrincipal(c *fiber.Ctx) (auth.Principal, error) {
	creds := auth.Credentials{
		ClientID:      c.Get("Client-ID"),
		ClientSecret:  c.Get("Client-Secret"),
		Authorization: c.Get(fiber.HeaderAuthorization),
	}
	p, err := a.o.Auth.Authenticate(c.UserContext(), creds)
	if err != nil {
		return auth.Principal{}, err
	}
	if err := auth.RequireFederated(p); err != nil {
		return auth.Principal{}, err
	}
	if err := auth.RequireScopes(p, auth.ScopeCallsRead); err != nil {
		return auth.Principal{}, err
	}
	return p, nil
}

// historyFailure answers a history read that failed.
func (a *api) historyFailure(c *fiber.Ctx, tr string, err error) error {
	var qe *history.QueryError
	switch {
	case errors.As(err, &qe):
		return a.fail(c, fiber.StatusBadRequest, qe.Error(), nil)
	case errors.Is(err, history.ErrNotFound):
		return a.fail(c, fiber.StatusNotFound, "no such call in this organization's history", nil)
	case errors.Is(err, history.ErrUnavailable) || c.UserContext().Err() != nil:
		a.log.Warn("history read unavailable; answered 503", "trace_id", tr, "error", err)
		return a.fail(c, fiber.StatusServiceUnavailable, "the call history is unavailable for a moment; ask again after Retry-After seconds", nil)
	}
	a.log.Error("history read failed", "trace_id", tr, "error", err)
	return a.fail(c, fiber.StatusInternalServerError, "internal error; the call history was not read", nil)
}

// getCall serves GET /api/v1/calls/{id}.
func (a *api) getCall(c *fiber.Ctx) error {
	tr := trace(c)
	p, err := a.readPrincipal(c)
	if err != nil {
		return a.authFailure(c, tr, err)
	}
	it, err := a.o.History.Call(c.UserContext(), p.OrgID, strings.Clone(c.Params("id")))
	if err != nil {
		return a.historyFailure(c, tr, err)
	}
	return c.JSON(it)
}

// listCalls serves GET /api/v1/calls: a page of JSON, or with Accept: text/csv every matching
// call as CSV.
func (a *api) listCalls(c *fiber.Ctx) error {
	tr := trace(c)
	p, err := a.readPrincipal(c)
	if err != nil {
		return a.authFailure(c, tr, err)
	}
	params := url.Values{}
	c.Context().QueryArgs().VisitAll(func(k, v []byte) {
		params[string(k)] = append(params[string(k)], string(v))
	})
	csv := wantsCSV(c.Get(fiber.HeaderAccept))
	q, err := a.o.History.Prepare(c.UserContext(), p.OrgID, params, csv)
	if err != nil {
		return a.historyFailure(c, tr, err)
	}
	if !csv {
		page, err := a.o.History.Page(c.UserContext(), q)
		if err != nil {
			return a.historyFailure(c, tr, err)
		}
		return c.JSON(page)
	}
	exp, err := a.o.History.Export(c.UserContext(), q)
	if err != nil {
		return a.historyFailure(c, tr, err)
	}
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="calls.csv"`)
	c.Set(fiber.HeaderCacheControl, "no-store")
	// The rows outlive the handler and its timeout: they stop when the client goes away or the
	// server shuts down (StreamContext). A failure after the status line can only cut the
	// export short, so it is logged, and the body ends with a comment line saying so.
	ctx, cancel := context.WithCancel(a.o.StreamContext)
	orgID := p.OrgID
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		err := exp.WriteTo(ctx, w)
		if err == nil || ctx.Err() != nil || w.Flush() != nil {
			return // done, shutting down, or the client went away
		}
		a.log.Error("CSV export cut short", "trace_id", tr, "org_id", orgID, "error", err)
		_, _ = w.WriteString("\n# the export was cut short; ask again\n")
		_ = w.Flush()
	})
	return nil
}

// wantsCSV reports whether an Accept header asks for text/csv ahead of JSON.
func wantsCSV(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "text/csv":
			return true
		case "application/json", "*/*", "application/*":
			return false
		}
	}
	return false
}
