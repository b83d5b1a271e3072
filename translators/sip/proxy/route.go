package proxy

import (
	"encoding/hex"
	"errors"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/translators/sip/callmodel"
)

// branchPrefix starts every branch the proxy writes: RFC 3261's magic cookie and a mark.
const branchPrefix = sip.RFC3261BranchMagicCookie + "cw"

// handle routes one parsed message. It runs on the goroutine that read the message.
func (p *Proxy) handle(msg sip.Message, data []byte, src peer, at time.Time) {
	p.c.received.Add(1)
	msg.SetSource(src.addr.String())
	msg.SetTransport(src.network)
	switch m := msg.(type) {
	case *sip.Request:
		if m.Via() == nil || m.From() == nil || m.To() == nil || m.CallID() == nil || m.CSeq() == nil {
			p.malformed(src, "request lacks Via, From, To, Call-ID or CSeq")
			return
		}
		p.handleRequest(m, data, src, at)
	case *sip.Response:
		if m.Via() == nil || m.CallID() == nil || m.CSeq() == nil {
			p.malformed(src, "response lacks Via, Call-ID or CSeq")
			return
		}
		p.handleResponse(m, data, src, at)
	}
}

func (p *Proxy) malformed(src peer, why string) {
	p.c.malformed.Add(1)
	p.warn("malformed", "sip proxy: dropped a malformed message", "src", src.addr.String(), "transport", src.network, "why", why)
}

// branches returns the loop-detection part of the branch the proxy gives req (from the fields
// RFC 3261 section 16.6 item 8 names, less the To tag so that the ACK for a non-2xx response
// matches its INVITE) and the whole branch, which adds the upstream's branch and sent-by. A
// CANCEL, and the ACK for a non-2xx response, get the same branch as their INVITE.
func branches(req *sip.Request) (loop, full string) {
	h := fnv.New64a()
	w := func(s string) { _, _ = h.Write([]byte(s)); _, _ = h.Write([]byte{0}) }
	w(req.Recipient.String())
	if t, ok := req.From().Params.Get("tag"); ok {
		w(t)
	}
	w(req.CallID().Value())
	w(strconv.FormatUint(uint64(req.CSeq().SeqNo), 10))
	for _, name := range []string{"Proxy-Require", "Proxy-Authorization"} {
		for _, x := range req.GetHeaders(name) {
			w(x.Value())
		}
	}
	var sum [8]byte
	loop = hex.EncodeToString(h.Sum(sum[:0]))
	v := req.Via()
	b, _ := v.Params.Get("branch")
	w(b)
	w(v.SentBy())
	full = branchPrefix + loop + "." + hex.EncodeToString(h.Sum(sum[:0]))
	return loop, full
}

// looped reports whether req carries a Via of this proxy with the loop part it would give req
// now: the request came back unchanged (RFC 3261 section 16.3 item 4).
func (p *Proxy) looped(req *sip.Request, loop string) bool {
	for _, h := range req.GetHeaders("Via") {
		v, ok := h.(*sip.ViaHeader)
		if !ok || !p.isOurs(v.Host, v.Port) {
			continue
		}
		if b, _ := v.Params.Get("branch"); strings.HasPrefix(b, branchPrefix+loop+".") {
			return true
		}
	}
	return false
}

func (p *Proxy) handleRequest(req *sip.Request, data []byte, src peer, at time.Time) {
	isAck, isCancel := req.IsAck(), req.IsCancel()
	if mf := req.MaxForwards(); mf != nil && mf.Val() == 0 {
		p.c.tooManyHops.Add(1)
		if !isAck {
			p.reply(req, src, 483, "Too Many Hops")
		}
		return
	}
	loop, branch := branches(req)
	if p.looped(req, loop) {
		p.c.loops.Add(1)
		if !isAck {
			p.reply(req, src, 482, "Loop Detected")
		}
		return
	}
	switch {
	case isAck:
		p.handleAck(req, data, src, at, branch)
		return
	case isCancel:
		if p.handleCancel(req, data, src, at, branch) {
			return
		}
		// No INVITE to match: forwarded statelessly, like any request, below.
		p.forwardStateless(req, data, src, at, branch)
		return
	}
	if p.absorbRetransmission(req, src, branch) {
		return
	}
	dst, initial, err := p.nextHop(req, src)
	if err != nil {
		p.c.unroutable.Add(1)
		p.warn("unroutable", "sip proxy: no next hop", "method", string(req.Method), "call_id", req.CallID().Value(), "error", err)
		p.reply(req, src, 502, "Bad Gateway")
		return
	}
	if req.IsInvite() {
		p.reply(req, src, 100, "Trying")
	}
	fwd := p.prepare(req, src, dst, branch, initial)
	b := render(fwd)

	x := &tx{key: branch, method: string(req.Method), up: src, down: dst, req: fwd, data: b, started: at}
	p.txs.mu.Lock()
	if p.txs.stopped || p.txs.m[branch] != nil {
		p.txs.mu.Unlock()
		p.c.absorbed.Add(1)
		return
	}
	if len(p.txs.m) < p.txs.max {
		p.txs.m[branch] = x
		p.startTimers(x)
	} else {
		x = nil
		p.c.stateless.Add(1)
		p.warn("stateless", "sip proxy: too many open transactions, forwarding without state", "max", p.txs.max)
	}
	p.txs.mu.Unlock()

	if err := p.send(dst, b); err != nil {
		p.sendFailed(x, req, src, dst, err)
		return
	}
	p.c.forwarded.Add(1)
	p.observe(req, data, src, dst, at)
}

// sendFailed answers 503 upstream for a request the next hop could not be sent (RFC 3261
// section 16.9) and forgets its transaction.
func (p *Proxy) sendFailed(x *tx, req *sip.Request, src, dst peer, err error) {
	p.c.unroutable.Add(1)
	p.warn("send", "sip proxy: cannot send to next hop", "dst", dst.addr.String(), "transport", dst.network, "method", string(req.Method), "error", err)
	if x != nil {
		p.txs.mu.Lock()
		if p.txs.m[x.key] == x {
			delete(p.txs.m, x.key)
		}
		x.stop()
		p.txs.mu.Unlock()
		p.replyUpstream(x.req, src, 503, "Service Unavailable")
	}
}

// absorbRetransmission answers a retransmitted request from its transaction: the last response
// relayed, or 100 Trying for an INVITE not yet answered. The request is not forwarded again (the
// proxy retransmits over UDP itself).
func (p *Proxy) absorbRetransmission(req *sip.Request, src peer, branch string) bool {
	p.txs.mu.Lock()
	x := p.txs.m[branch]
	var last []byte
	if x != nil {
		last = x.last
	}
	p.txs.mu.Unlock()
	if x == nil {
		return false
	}
	p.c.absorbed.Add(1)
	switch {
	case last != nil:
		_ = p.send(src, last)
	case req.IsInvite():
		p.reply(req, src, 100, "Trying")
	}
	return true
}

// handleAck forwards an ACK: the ACK for a non-2xx response hop by hop to where its INVITE went
// (or nowhere, when the response was the proxy's own), the ACK for a 2xx end to end by its Route.
func (p *Proxy) handleAck(req *sip.Request, data []byte, src peer, at time.Time, branch string) {
	p.txs.mu.Lock()
	x := p.txs.m[branch]
	var dst peer
	hop, local := false, false
	if x != nil && x.method == string(sip.INVITE) && x.final >= 300 {
		hop, local, dst = true, x.local, x.down
	}
	p.txs.mu.Unlock()
	if local {
		p.c.absorbed.Add(1)
		return
	}
	if !hop {
		p.forwardStateless(req, data, src, at, branch)
		return
	}
	fwd := p.prepare(req, src, dst, branch, false)
	if err := p.send(dst, render(fwd)); err != nil {
		p.sendFailed(nil, req, src, dst, err)
		return
	}
	p.c.forwarded.Add(1)
	p.observe(req, data, src, dst, at)
}

// forwardStateless forwards a request without a transaction: an ACK for a 2xx, or a CANCEL
// that matches no INVITE. Its branch is derived from the request, so a CANCEL still reaches the
// INVITE it names at the next hop.
func (p *Proxy) forwardStateless(req *sip.Request, data []byte, src peer, at time.Time, branch string) {
	dst, initial, err := p.nextHop(req, src)
	if err != nil {
		p.c.unroutable.Add(1)
		p.warn("unroutable", "sip proxy: no next hop", "method", string(req.Method), "call_id", req.CallID().Value(), "error", err)
		return
	}
	fwd := p.prepare(req, src, dst, branch, initial)
	if err := p.send(dst, render(fwd)); err != nil {
		p.sendFailed(nil, req, src, dst, err)
		return
	}
	p.c.forwarded.Add(1)
	p.observe(req, data, src, dst, at)
}

// handleCancel answers a CANCEL that matches an INVITE transaction with 200 and forwards it to
// where the INVITE went, at once when the INVITE has had a provisional response there, else when
// it has one (RFC 3261 section 9.1). A CANCEL after the final response is answered and ends here.
// It reports false when no INVITE matches.
func (p *Proxy) handleCancel(req *sip.Request, data []byte, src peer, at time.Time, branch string) bool {
	p.txs.mu.Lock()
	x := p.txs.m[branch]
	if x == nil || x.method != string(sip.INVITE) {
		p.txs.mu.Unlock()
		return false
	}
	dst := x.down
	forward := x.final == 0 && !x.canceled
	x.canceled = true
	p.txs.mu.Unlock()

	p.reply(req, src, 200, "OK")
	if !forward {
		p.c.absorbed.Add(1)
		return true
	}
	b := render(p.prepare(req, src, dst, branch, false))
	p.txs.mu.Lock()
	now := x.gotResp
	if !now {
		x.cancel = b
	}
	p.txs.mu.Unlock()
	if now {
		if err := p.send(dst, b); err != nil {
			p.sendFailed(nil, req, src, dst, err)
			return true
		}
	}
	p.c.forwarded.Add(1)
	p.observe(req, data, src, dst, at)
	return true
}

// nextHop is where req goes: an initial request (no To tag) from the PBX to the trunk, from
// anywhere else to the PBX; an in-dialog request to its first Route that is not this proxy, else
// to its Request-URI, else (a Request-URI naming this proxy) like an initial request.
func (p *Proxy) nextHop(req *sip.Request, src peer) (dst peer, initial bool, err error) {
	if req.To().Params.Has("tag") {
		for _, h := range req.GetHeaders("Route") {
			r, ok := h.(*sip.RouteHeader)
			if !ok || p.isOurs(r.Address.Host, r.Address.Port) {
				continue
			}
			d, err := p.uriPeer(r.Address, src.network)
			return d, false, err
		}
		if !p.isOurs(req.Recipient.Host, req.Recipient.Port) {
			d, err := p.uriPeer(req.Recipient, src.network)
			return d, false, err
		}
	}
	if p.fromPBX(req, src) {
		return peer{network: src.network, addr: p.trunk}, true, nil
	}
	return peer{network: src.network, addr: p.pbx}, true, nil
}

// fromPBX reports whether a request came from the PBX: from its address; over TCP, whose
// source ports are ephemeral, from its IP with any port, except when the trunk shares that IP:
// then the request's top Via must also name the PBX's port.
func (p *Proxy) fromPBX(req *sip.Request, src peer) bool {
	if src.addr == p.pbx {
		return true
	}
	if src.network != "tcp" || src.addr.Addr() != p.pbx.Addr() {
		return false
	}
	if p.trunk.Addr() != p.pbx.Addr() {
		return true
	}
	v := req.Via()
	return v != nil && v.Port == int(p.pbx.Port())
}

// uriPeer is the next hop a SIP URI names: its host and port (5060 when absent), on its
// transport parameter when the proxy serves that transport, else on network.
func (p *Proxy) uriPeer(u sip.Uri, network string) (peer, error) {
	if t, ok := u.UriParams.Get("transport"); ok {
		switch t = strings.ToLower(t); {
		case t == "udp" && len(p.udp) > 0, t == "tcp" && p.tcpPort > 0:
			network = t
		}
	}
	if u.Host == "" {
		return peer{}, errors.New("uri has no host")
	}
	ip, err := p.resolve(p.ctx, u.Host)
	if err != nil {
		return peer{}, err
	}
	port := u.Port
	if port == 0 {
		port = 5060
	}
	return peer{network: network, addr: netip.AddrPortFrom(ip, uint16(port))}, nil
}

// local is the host and port the proxy advertises on a transport.
func (p *Proxy) local(network string) (string, int) {
	if network == "tcp" || len(p.udp) == 0 {
		return p.tcpHost, p.tcpPort
	}
	return p.udp[0].host, p.udp[0].port
}

// prepare returns the request to send on, req itself changed in place, with received/rport on the upstream's Via (RFC 3261 section 18.2.1, RFC 3581), this proxy's
// Route entries removed, Max-Forwards decremented (70 when absent), this proxy's Via on top and,
// for an initial dialog-creating request, its Record-Route.
func (p *Proxy) prepare(req *sip.Request, src, dst peer, branch string, initial bool) *sip.Request {
	fwd := req
	if v := fwd.Via(); v != nil {
		ip := src.addr.Addr().String()
		if v.Host != ip {
			v.Params.Add("received", ip)
		}
		if rp, ok := v.Params.Get("rport"); ok && rp == "" {
			v.Params.Add("rport", strconv.Itoa(int(src.addr.Port())))
		}
	}
	for {
		r, ok := fwd.GetHeader("Route").(*sip.RouteHeader)
		if !ok || !p.isOurs(r.Address.Host, r.Address.Port) {
			break
		}
		fwd.RemoveHeader("Route")
	}
	mf := sip.MaxForwardsHeader(70)
	if old := fwd.MaxForwards(); old != nil {
		mf = sip.MaxForwardsHeader(old.Val() - 1)
		fwd.ReplaceHeader(&mf)
	} else {
		fwd.AppendHeader(&mf)
	}
	host, port := p.local(dst.network)
	if initial {
		switch fwd.Method {
		case sip.INVITE, sip.SUBSCRIBE, sip.REFER, sip.NOTIFY:
			params := sip.NewParams()
			if dst.network == "tcp" {
				params.Add("transport", "tcp")
			}
			params.Add("lr", "")
			fwd.PrependHeader(&sip.RecordRouteHeader{Address: sip.Uri{Scheme: "sip", Host: host, Port: port, UriParams: params}})
		}
	}
	params := sip.NewParams()
	params.Add("branch", branch)
	fwd.PrependHeader(&sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: strings.ToUpper(dst.network),
		Host: host, Port: port, Params: params})
	fwd.SetDestination(dst.addr.String())
	fwd.SetTransport(dst.network)
	return fwd
}

// reply sends a response the proxy makes itself to the request's source.
func (p *Proxy) reply(req *sip.Request, src peer, code int, reason string) {
	res := sip.NewResponseFromRequest(req, code, reason, nil)
	p.c.replied.Add(1)
	if err := p.send(src, render(res)); err != nil {
		p.warn("send", "sip proxy: cannot send a response", "dst", src.addr.String(), "code", code, "error", err)
	}
}

// replyUpstream answers upstream from the request as the proxy forwarded it (its own Via on
// top, removed from the response).
func (p *Proxy) replyUpstream(fwd *sip.Request, up peer, code int, reason string) {
	res := sip.NewResponseFromRequest(fwd, code, reason, nil)
	res.RemoveHeader("Via")
	p.c.replied.Add(1)
	if err := p.send(up, render(res)); err != nil {
		p.warn("send", "sip proxy: cannot send a response", "dst", up.addr.String(), "code", code, "error", err)
	}
}

// handleResponse relays a response upstream: to where its request came from when the proxy
// holds its transaction, else to the next Via. It absorbs 100 Trying (hop by hop) and the next
// hop's 200 to a CANCEL the proxy answered itself; it relays every 2xx to an INVITE.
func (p *Proxy) handleResponse(res *sip.Response, data []byte, src peer, at time.Time) {
	v := res.Via()
	if !p.isOurs(v.Host, v.Port) {
		p.c.unroutable.Add(1)
		p.warn("unroutable", "sip proxy: dropped a response whose top Via is not this proxy's", "src", src.addr.String(), "via", v.SentBy())
		return
	}
	branch, _ := v.Params.Get("branch")
	method := string(res.CSeq().MethodName)
	code := res.StatusCode

	var up peer
	var cancel []byte
	var cancelTo peer
	var sent *sip.Request // the request as the proxy forwarded it, when it holds the transaction
	p.txs.mu.Lock()
	x := p.txs.m[branch]
	if x != nil {
		up, sent = x.up, x.req
		switch {
		case method == string(sip.CANCEL) && x.canceled:
			p.txs.mu.Unlock()
			p.c.absorbed.Add(1)
			return
		case method == x.method:
			if !x.gotResp {
				x.gotResp = true
				x.data = nil
				if x.timer != nil {
					x.timer.Stop()
				}
				p.armTimeout(x, code)
			}
			if x.cancel != nil {
				cancel, cancelTo, x.cancel = x.cancel, x.down, nil
				if code >= 200 {
					cancel = nil // the INVITE is over: nothing to cancel
				}
			}
			if code >= 200 {
				if x.final == 0 {
					x.final = code
				}
				p.txs.forgetAfter(x, linger(x.up.network))
			}
		}
	}
	p.txs.mu.Unlock()
	if cancel != nil {
		if err := p.send(cancelTo, cancel); err != nil {
			p.warn("send", "sip proxy: cannot send CANCEL", "dst", cancelTo.addr.String(), "error", err)
		}
	}
	if code == 100 {
		p.c.absorbed.Add(1)
		return
	}

	fwd := res
	if code == 503 && p.observing() {
		fwd = relayCopy(res) // relayed as 500 below; the observer reads the 503
	}
	fwd.RemoveHeader("Via")
	if fwd.Via() == nil && sent != nil {
		// The next hop answered with this proxy's Via alone: a UAS that copied the Via of the
		// CANCEL it just received (which the proxy sent with its own Via only, RFC 3261 section
		// 9.1) into its 487. The transaction knows the path the request came by: restore it,
		// as a stateful proxy builds its upstream response from its server transaction.
		for i, h := range sent.GetHeaders("Via") {
			if v, ok := h.(*sip.ViaHeader); ok && i > 0 {
				fwd.AppendHeader(v.Clone())
			}
		}
	}
	if code == 503 {
		// RFC 3261 section 16.7: a 503 from the next hop means that hop is unavailable, not
		// this proxy; upstream it would make the carrier treat the proxy itself as down. Relay
		// it as 500, keeping the reason phrase (as Kamailio does). The observer still sees the
		// 503 the PBX sent.
		fwd.StatusCode = 500
	}
	next := fwd.Via()
	if next == nil {
		p.c.unroutable.Add(1)
		p.warn("unroutable", "sip proxy: dropped a response with no Via left", "src", src.addr.String())
		return
	}
	if x == nil {
		var err error
		if up, err = p.viaPeer(next); err != nil {
			p.c.unroutable.Add(1)
			p.warn("unroutable", "sip proxy: no next hop for a response", "via", next.SentBy(), "error", err)
			return
		}
	}
	b := render(fwd)
	if err := p.send(up, b); err != nil {
		p.c.unroutable.Add(1)
		p.warn("send", "sip proxy: cannot relay a response", "dst", up.addr.String(), "code", code, "error", err)
		return
	}
	if x != nil && up.network == "udp" {
		p.txs.mu.Lock()
		x.last = b
		p.txs.mu.Unlock()
	}
	p.c.forwarded.Add(1)
	p.observe(res, data, src, up, at)
}

// viaPeer is where a response goes by a Via value: received and rport when present, else
// sent-by (RFC 3261 section 18.2.2, RFC 3581).
func (p *Proxy) viaPeer(v *sip.ViaHeader) (peer, error) {
	host, port := v.Host, v.Port
	if r, ok := v.Params.Get("received"); ok && r != "" {
		host = r
	}
	if rp, ok := v.Params.Get("rport"); ok && rp != "" {
		if n, err := strconv.Atoi(rp); err == nil {
			port = n
		}
	}
	network := strings.ToLower(v.Transport)
	if network != "tcp" || p.tcpPort == 0 {
		network = "udp"
	}
	u := sip.Uri{Host: host, Port: port}
	return p.uriPeer(u, network)
}

// observe hands a forwarded message to Observe, on the forwarding path (see Config.Observe).
func (p *Proxy) observe(msg sip.Message, data []byte, src, dst peer, at time.Time) {
	if !p.observing() {
		return
	}
	p.callObserve(callmodel.Message{SIP: msg, Data: data, Transport: src.network, Src: src.addr, Dst: dst.addr, At: at})
}

// observing reports whether messages go to Observe.
func (p *Proxy) observing() bool { return p.cfg.Observe != nil }

// callObserve calls Observe with m, recovering and counting a panic.
func (p *Proxy) callObserve(m callmodel.Message) {
	defer func() {
		if r := recover(); r != nil {
			p.c.observeFailures.Add(1)
			p.warn("observe_panic", "sip proxy: observer panicked, message not observed (the call goes on)", "panic", r)
		}
	}()
	p.cfg.Observe(m)
}

// startTimers (with txs.mu held) arms x's retransmission over UDP and its timeout.
func (p *Proxy) startTimers(x *tx) {
	if x.down.network == "udp" {
		x.interval = t1
		x.timer = time.AfterFunc(t1, func() { p.retransmit(x) })
	} else {
		x.timer = time.AfterFunc(timerB, func() { p.retransmit(x) })
	}
}

// armTimeout (with txs.mu held) bounds a transaction that has a response: an INVITE with only
// provisional responses is forgotten after timer C; anything else lingers after its final.
func (p *Proxy) armTimeout(x *tx, code int) {
	if code < 200 {
		p.txs.forgetAfter(x, timerC)
	}
}

// retransmit resends an unanswered request over UDP, doubling the interval (capped at T2 for
// non-INVITE), and after timer B answers 408 upstream and lingers.
func (p *Proxy) retransmit(x *tx) {
	p.txs.mu.Lock()
	if p.txs.m[x.key] != x || x.gotResp {
		p.txs.mu.Unlock()
		return
	}
	if time.Since(x.started) >= timerB {
		x.final, x.local, x.data = 408, true, nil
		p.txs.forgetAfter(x, linger(x.up.network))
		req, up := x.req, x.up
		p.txs.mu.Unlock()
		p.c.timeouts.Add(1)
		p.warn("timeout", "sip proxy: next hop never answered, 408 sent upstream", "dst", x.down.addr.String(), "method", x.method)
		p.replyUpstream(req, up, 408, "Request Timeout")
		return
	}
	data, down := x.data, x.down
	if x.method == string(sip.INVITE) {
		x.interval *= 2
	} else {
		x.interval = min(2*x.interval, t2)
	}
	x.timer = time.AfterFunc(min(x.interval, timerB-time.Since(x.started)), func() { p.retransmit(x) })
	p.txs.mu.Unlock()
	_ = p.send(down, data)
}
