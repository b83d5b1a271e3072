package proxy

import "github.com/emiago/sipgo/sip"

// The observer gets each message exactly as received while the proxy forwards a changed one.
// A full clone (sip.Request.Clone) copies every header and the body: most of what observing cost
// the proxy. The copies below are the message's struct with a list of headers of its own (sipgo's
// PrependHeader, given no header, builds that list anew) that shares every header object and the
// body with the original, but for the top Via of a request, whose received and rport parameters
// the proxy sets in place: that one is cloned. Every other change the proxy makes (a header
// added, removed or replaced, the status code, the destination) changes the copy's own fields or
// its own list of headers, never a header object, so the original stays as it was received.
// Neither side changes a shared header object afterwards: the proxy renders the copy, the
// observer only reads. TestCopiesLeaveTheOriginal holds sipgo to this.

// forwardCopy returns a copy of req for the proxy to change and forward.
func forwardCopy(req *sip.Request) *sip.Request {
	c := *req
	c.PrependHeader()
	if v := req.Via(); v != nil {
		c.ReplaceHeader(v.Clone())
	}
	return &c
}

// relayCopy returns a copy of res for the proxy to change and relay upstream.
func relayCopy(res *sip.Response) *sip.Response {
	c := *res
	c.PrependHeader()
	return &c
}
