package proxy

import "github.com/emiago/sipgo/sip"

// The observer reads the messages the proxy forwarded, as it forwarded them: what the proxy
// changes (Via, Route, Record-Route, Max-Forwards) is nothing the call model reads, and the text
// an event carries is the message as received (Message.Data). One change would mislead it: a 503
// from the next hop is relayed as 500. That response alone is copied: the copy is the message's
// struct with a list of headers of its own (sipgo's PrependHeader, given no header, builds that
// list anew) that shares every header object and the body with the original. Every change the
// proxy makes to it (the top Via removed, the status code) changes the copy's own fields or list,
// never a header object, so the original stays as it was received. TestRelayCopyLeavesTheOriginal
// holds sipgo to this.

// relayCopy returns a copy of res for the proxy to change and relay upstream.
func relayCopy(res *sip.Response) *sip.Response {
	c := *res
	c.PrependHeader()
	return &c
}
