package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/history"
)

// CallbacksPath is the to-call-back list; CallbacksPath + "/{number}/dismiss" closes an item.
const CallbacksPath = "/api/v1/callbacks"

// listCallbacks serves GET /api/v1/callbacks: a page of the list, for a key holding
// org.calls.read.
func (a *api) listCallbacks(c *fiber.Ctx) error {
	tr := trace(c)
	p, err := a.readPrincipal(c)
	if err != nil {
		return a.authFailure(c, tr, err)
	}
	params := url.Values{}
	c.Context().QueryArgs().VisitAll(func(k, v []byte) {
		params[string(k)] = append(params[string(k)], string(v))
	})
	page, err := a.o.History.Callbacks(c.UserContext(), p.OrgID, params)
	if err != nil {
		return a.callbackFailure(c, tr, err)
	}
	return c.JSON(page)
}

// dismissBody is the optional body of a dismissal.
type dismissBody struct {
	// Extension is the extension that dismissed the item.
	Extension string `json:"extension"`
}

// dismissCallback serves POST /api/v1/callbacks/{number}/dismiss, for a key holding both
// org.calls.read and org.callbacks.write: it answers the item as closed, or 404 when the
// number has no open item. The number is path-escaped (an E.164 number's "+" as %2B); the
// body, when there is one, is {"extension": "..."}.
func (a *api) dismissCallback(c *fiber.Ctx) error {
	tr := trace(c)
	p, err := a.readPrincipal(c)
	if err == nil {
		err = auth.RequireScopes(p, auth.ScopeCallbacksWrite)
	}
	if err != nil {
		return a.authFailure(c, tr, err)
	}
	number, err := url.PathUnescape(c.Params("number"))
	if err != nil || strings.TrimSpace(number) == "" {
		return a.fail(c, fiber.StatusBadRequest, "number: is not a path-escaped number or text of the list", nil)
	}
	var body dismissBody
	if raw := c.Body(); len(strings.TrimSpace(string(raw))) > 0 {
		if msg := checkContentType(c.Get(fiber.HeaderContentType)); msg != "" {
			return a.fail(c, fiber.StatusBadRequest, msg, nil)
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || dec.More() {
			return a.fail(c, fiber.StatusBadRequest, `body: must be empty or {"extension": "<extension>"}`, nil)
		}
	}
	it, err := a.o.History.Dismiss(c.UserContext(), p.OrgID, number, body.Extension, time.Now())
	if err != nil {
		return a.callbackFailure(c, tr, err)
	}
	a.noticeCallbacks(c.UserContext(), tr, p.OrgID)
	return c.JSON(it)
}

// noticeCallbacks tells the organization's desks that its to-call-back list changed, within
// NoticeTimeout. A failure is logged: the dismissal stands, and desks read the list again when
// they reconnect.
func (a *api) noticeCallbacks(ctx context.Context, tr, orgID string) {
	if a.o.Notices == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.o.NoticeTimeout)
	defer cancel()
	if err := a.o.Notices.NotifyCallbacks(ctx, orgID); err != nil {
		a.log.Warn("to-call-back notice missed; desks read the list again when they reconnect",
			"trace_id", tr, "org_id", orgID, "error", err)
	}
}

// callbackFailure answers a to-call-back request that failed.
func (a *api) callbackFailure(c *fiber.Ctx, tr string, err error) error {
	switch {
	case errors.Is(err, history.ErrNoCallback):
		return a.fail(c, fiber.StatusNotFound, "the number has no open item on this organization's to-call-back list", nil)
	case errors.Is(err, history.ErrNoCallbacks):
		return a.fail(c, fiber.StatusNotImplemented, "this server's store keeps no to-call-back list", nil)
	}
	return a.historyFailure(c, tr, err)
}
