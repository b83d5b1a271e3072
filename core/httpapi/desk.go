package httpapi

import (
	"embed"
	"fmt"

	"github.com/gofiber/fiber/v2"
)

// DeskPath is the front desk page: a page a receptionist leaves open, showing each ringing call
// of the workstation's locations as it rings. See docs/popup.md.
const DeskPath = "/desk"

// DeskCSP is the Content-Security-Policy of the front desk page and its files: scripts, styles,
// images and connections from the service itself only, nothing inline, no framing, no forms
// submitted anywhere. Audio and video may come from any http or https address: a call's
// recordings stay where the phone system keeps them, and the Calls view plays them from there.
const DeskCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"media-src 'self' http: https:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// deskFiles holds the page and its assets, built into the binary. It is read-only.
//
//go:embed desk
var deskFiles embed.FS

// serveDesk registers the page and its files. They are small and served from memory, with the
// strict policy and no caching beyond revalidation, so that an upgraded server's page is picked
// up on the next reload.
func (a *api) serveDesk(app *fiber.App) error {
	assets := []struct{ route, file, contentType string }{
		{DeskPath, "desk/index.html", "text/html; charset=utf-8"},
		{DeskPath + "/desk.css", "desk/desk.css", "text/css; charset=utf-8"},
		{DeskPath + "/desk.js", "desk/desk.js", "text/javascript; charset=utf-8"},
		{DeskPath + "/icon.svg", "desk/icon.svg", "image/svg+xml"},
	}
	for _, f := range assets {
		body, err := deskFiles.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("httpapi: desk page: %w", err)
		}
		ct := f.contentType
		app.Get(f.route, func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, ct)
			c.Set(fiber.HeaderCacheControl, "no-cache")
			c.Set(fiber.HeaderContentSecurityPolicy, DeskCSP)
			c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
			c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
			c.Set(fiber.HeaderXFrameOptions, "DENY")
			return c.Send(body)
		})
	}
	return nil
}
