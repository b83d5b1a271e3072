package proxy

import "github.com/emiago/sipgo/sip"

// The observer gets each message exactly as received while the proxy forwards a changed one.
// A full clone (sip.Request.Clone) copies every header and the body: most of what observing cost
// the proxy. The copies below share every header object and the body with the original, and
// copy only what the proxy changes in place: the top Via, whose received and rport parameters it
// sets. Every other change the proxy makes (a header added, removed or replaced) changes the
// copy's own list of headers, never a header object, so the original stays as it was received.
// Neither side changes a shared header object afterwards: the proxy renders the copy, the
// observer only reads.

// forwardCopy returns a copy of req for the proxy to change and forward.
func forwardCopy(req *sip.Request) *sip.Request {
	c := sip.NewRequest(req.Method, *req.Recipient.Clone())
	c.SipVersion = req.SipVersion
	copyHeaders(c, req.Headers(), true)
	c.SetBody(req.Body())
	c.SetTransport(req.Transport())
	c.SetSource(req.Source())
	c.SetDestination(req.Destination())
	return c
}

// relayCopy returns a copy of res for the proxy to change and relay upstream.
func relayCopy(res *sip.Response) *sip.Response {
	c := sip.NewResponse(res.StatusCode, res.Reason)
	c.SipVersion = res.SipVersion
	copyHeaders(c, res.Headers(), false)
	c.SetBody(res.Body())
	c.SetTransport(res.Transport())
	c.SetSource(res.Source())
	c.SetDestination(res.Destination())
	return c
}

// copyHeaders appends hs to dst, sharing each header object except the top Via, which is cloned
// when cloneVia is set.
func copyHeaders(dst interface{ AppendHeader(sip.Header) }, hs []sip.Header, cloneVia bool) {
	for _, h := range hs {
		if v, ok := h.(*sip.ViaHeader); ok && cloneVia {
			cloneVia = false
			dst.AppendHeader(v.Clone())
			continue
		}
		dst.AppendHeader(h)
	}
}
