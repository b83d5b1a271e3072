package ami

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/callwire/callwire/translators/netaddr"
)

// Defaults of Config.
const (
	DefaultDialTimeout     = 10 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultPingInterval    = 20 * time.Second
	DefaultPingTimeout     = 10 * time.Second
	DefaultMaxQueuedEvents = 100_000
	logoffTimeout          = 2 * time.Second
)

var (
	// ErrClosed is returned by the methods of a Conn that Close has closed while it was up,
	// and by its Err.
	ErrClosed = errors.New("ami connection closed")
	// ErrAuthentication is wrapped by Login when Asterisk refuses the credentials.
	ErrAuthentication = errors.New("ami authentication failed")
	// ErrPingTimeout is wrapped by Err when the keepalive Ping went unanswered; the connection
	// is then closed.
	ErrPingTimeout = errors.New("ami ping unanswered")
)

// ActionError is returned, with the response, by Do and DoList when Asterisk answers an action
// with "Response: Error".
type ActionError struct {
	Action  string
	Message string
}

// Error implements error.
func (e *ActionError) Error() string {
	return fmt.Sprintf("ami action %s failed: %s", e.Action, e.Message)
}

// Config says where and how a Conn connects. Only Addr is required.
type Config struct {
	// Addr is the manager's address (Asterisk listens on 5038, 5039 with TLS), as the
	// translator's configuration parsed it. A host name is looked up at each Dial.
	Addr netaddr.HostPort
	// TLS, when not nil, makes Dial speak TLS with this configuration.
	TLS *tls.Config
	// DialTimeout bounds the TCP (and TLS) connect and the banner (default
	// DefaultDialTimeout); the context given to Dial bounds it too.
	DialTimeout time.Duration
	// WriteTimeout bounds the write of one action (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// PingInterval is the time between keepalive Pings once logged in (default
	// DefaultPingInterval; negative: no keepalive).
	PingInterval time.Duration
	// PingTimeout is how long a Ping may go unanswered before the connection is given up
	// (default DefaultPingTimeout).
	PingTimeout time.Duration
	// MaxQueuedEvents is how many events read off the socket may wait for the consumer of
	// Events before the Conn stops reading (default DefaultMaxQueuedEvents). No event is ever
	// discarded: past this bound the socket, and then Asterisk, is made to wait.
	MaxQueuedEvents int
	// Limits bound the lines and messages read.
	Limits Limits
	// Logger receives the connection's own diagnostics (nil: none). Secrets are never logged.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	var problems []string
	if c.Addr.IsZero() || c.Addr.Host == "" || c.Addr.Port == 0 {
		problems = append(problems, "addr needs a host and a port")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"dial timeout", c.DialTimeout}, {"write timeout", c.WriteTimeout}, {"ping timeout", c.PingTimeout}} {
		if d.v < 0 {
			problems = append(problems, d.name+" is negative")
		}
	}
	if c.MaxQueuedEvents < 0 {
		problems = append(problems, "max queued events is negative")
	}
	if c.Limits.MaxLineBytes < 0 || c.Limits.MaxMessageBytes < 0 {
		problems = append(problems, "limits are negative")
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("ami config: %s", strings.Join(problems, "; "))
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = DefaultPingTimeout
	}
	if c.MaxQueuedEvents == 0 {
		c.MaxQueuedEvents = DefaultMaxQueuedEvents
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Credentials log a manager user in. Their String and LogValue never show the secret.
type Credentials struct {
	Username string
	Secret   string
	// Events is the event mask of the session, e.g. "call,agent" ("" leaves Asterisk's
	// default for the user, "off" asks for none).
	Events string
}

// String implements fmt.Stringer without the secret.
func (c Credentials) String() string { return "ami user " + strconv.Quote(c.Username) }

// LogValue implements slog.LogValuer without the secret.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", c.Username), slog.String("events", c.Events))
}

// List is the answer to an action whose results come as a list of events (CoreShowChannels,
// QueueStatus, Status...): the response, the events of the list in order, and the event that
// ended it ("EventList: Complete").
type List struct {
	Response Message
	Items    []Message
	Complete Message
}

// Conn is one logged-in (or about to be) manager session. Responses and the events of a list
// are matched to their action by ActionID; every other event is delivered on Events in the
// order Asterisk sent it. A message the Reader refuses (a line without a key, a line or message
// over the limits) ends the connection with that error rather than being skipped. The methods
// of a Conn are safe for concurrent use.
type Conn struct {
	cfg     Config
	nc      net.Conn
	r       *Reader
	version string
	log     *slog.Logger

	wmu sync.Mutex // serialises writes
	w   *Writer

	mu      sync.Mutex
	pending map[string]*call
	nextID  uint64
	err     error // why the connection ended; set once
	pinging bool

	qmu        sync.Mutex
	qcond      *sync.Cond
	queue      []Message
	readerDone bool
	closing    bool

	events   chan Message
	done     chan struct{} // closed when the read loop has ended
	closeReq chan struct{} // closed by Close
	closeMu  sync.Once
	ctx      context.Context // ends at Close or when the connection ends; for the keepalive
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

type call struct {
	action   string
	list     bool
	response *Message
	items    []Message
	done     chan callResult // buffered: the read loop never waits for the caller
}

type callResult struct {
	list List
}

// Dial connects to the manager at cfg.Addr (with TLS when cfg.TLS is set), reads its banner and
// starts reading. The context bounds the connect and the banner only.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	var nc net.Conn
	nd := &net.Dialer{}
	if cfg.TLS != nil {
		nc, err = (&tls.Dialer{NetDialer: nd, Config: cfg.TLS}).DialContext(dctx, "tcp", cfg.Addr.String())
	} else {
		nc, err = nd.DialContext(dctx, "tcp", cfg.Addr.String())
	}
	if err != nil {
		return nil, fmt.Errorf("dial ami %s: %w", cfg.Addr, err)
	}
	deadline, _ := dctx.Deadline()
	_ = nc.SetReadDeadline(deadline)
	stop := context.AfterFunc(dctx, func() { _ = nc.SetReadDeadline(time.Unix(1, 0)) })
	r := NewReaderLimits(nc, cfg.Limits)
	version, err := r.ReadBanner()
	stop()
	if err != nil {
		_ = nc.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("ami %s: %w", cfg.Addr, err)
	}
	_ = nc.SetReadDeadline(time.Time{})
	c := &Conn{
		cfg:      cfg,
		nc:       nc,
		r:        r,
		version:  version,
		log:      cfg.Logger.With(slog.String("ami", cfg.Addr.String())),
		w:        NewWriter(nc),
		pending:  make(map[string]*call),
		events:   make(chan Message),
		done:     make(chan struct{}),
		closeReq: make(chan struct{}),
	}
	c.qcond = sync.NewCond(&c.qmu)
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.wg.Add(2)
	go c.readLoop()
	go c.deliverLoop()
	return c, nil
}

// Version returns the protocol version of the manager's banner ("7.0.3").
func (c *Conn) Version() string { return c.version }

// Events returns the channel of events that answer no pending action, in the order read. It is
// closed after the last event read before the connection ended has been delivered, or at Close.
// An event is never dropped: when the consumer falls behind by Config.MaxQueuedEvents events
// the Conn stops reading the socket until it catches up (Asterisk may then end the session;
// Err tells why the connection ended).
//
// Events of a list action (DoList) are not delivered here. An event that carries the ActionID
// of an action nobody waits for any more (an asynchronous OriginateResponse, the rest of a list
// whose caller gave up) is.
func (c *Conn) Events() <-chan Message { return c.events }

// Done returns a channel closed when the connection has ended (read error, failed keepalive or
// Close).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is up. It is ErrClosed when Close
// ended it, and the earlier reason when the connection had already ended before Close.
func (c *Conn) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Login logs in with cr. A refusal is an error wrapping ErrAuthentication (Asterisk then
// closes the connection). On success the keepalive starts (Config.PingInterval).
func (c *Conn) Login(ctx context.Context, cr Credentials) error {
	fields := []Field{{"Username", cr.Username}, {"Secret", cr.Secret}}
	if cr.Events != "" {
		fields = append(fields, Field{"Events", cr.Events})
	}
	resp, err := c.Do(ctx, Action{Name: "Login", Fields: fields})
	if err != nil {
		if ae := (*ActionError)(nil); errors.As(err, &ae) {
			return fmt.Errorf("%w for %s: %s", ErrAuthentication, cr, ae.Message)
		}
		return fmt.Errorf("ami login as %s: %w", cr, err)
	}
	c.log.Debug("ami logged in", slog.Any("user", cr), slog.String("message", resp.Get("Message")))
	c.mu.Lock()
	start := !c.pinging && c.cfg.PingInterval > 0
	c.pinging = true
	c.mu.Unlock()
	if start {
		c.wg.Add(1)
		go c.keepAlive()
	}
	return nil
}

// Ping sends a Ping action and waits for its answer.
func (c *Conn) Ping(ctx context.Context) error {
	_, err := c.Do(ctx, Action{Name: "Ping"})
	return err
}

// Do sends a and returns its response. An ActionID is generated when a.ID is empty; an ID
// already waiting for its response is refused. A "Response: Error" answer is returned with an
// *ActionError. The context bounds the wait; when it ends first, a late response is discarded.
func (c *Conn) Do(ctx context.Context, a Action) (Message, error) {
	l, err := c.do(ctx, a, false, nil)
	return l.Response, err
}

// DoList sends a, an action answered by a list of events (CoreShowChannels, QueueStatus...),
// and returns the response and every event of the list, up to the one marked "EventList:
// Complete". A response that announces no list ("Response: Error", or Success without
// "EventList: start") ends it at once.
func (c *Conn) DoList(ctx context.Context, a Action) (List, error) {
	return c.do(ctx, a, true, nil)
}

// do sends a and waits for its answer (see Do and DoList). A write that fails ends the
// connection; its error, which Err then returns, wraps failWith when that is not nil.
func (c *Conn) do(ctx context.Context, a Action, list bool, failWith error) (List, error) {
	if a.Name == "" {
		return List{}, fmt.Errorf("%w: action without a name", ErrInvalidField)
	}
	cl := &call{action: a.Name, list: list, done: make(chan callResult, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return List{}, err
	}
	if a.ID == "" {
		c.nextID++
		a.ID = "cw-" + strconv.FormatUint(c.nextID, 10)
	}
	if _, dup := c.pending[a.ID]; dup {
		c.mu.Unlock()
		return List{}, fmt.Errorf("ami action %s: ActionID %q is already waiting", a.Name, a.ID)
	}
	c.pending[a.ID] = cl
	c.mu.Unlock()

	if err := c.write(ctx, a, failWith); err != nil {
		c.forget(a.ID)
		return List{}, err
	}
	select {
	case res := <-cl.done:
		return res.outcome(a.Name)
	case <-ctx.Done():
		c.forget(a.ID)
		return List{}, fmt.Errorf("ami action %s: %w", a.Name, ctx.Err())
	case <-c.done:
		select {
		case res := <-cl.done: // answered just before the end
			return res.outcome(a.Name)
		default:
		}
		return List{}, fmt.Errorf("ami action %s: %w", a.Name, c.Err())
	}
}

func (r callResult) outcome(action string) (List, error) {
	if strings.EqualFold(r.list.Response.Response(), "Error") {
		return r.list, &ActionError{Action: action, Message: r.list.Response.Get("Message")}
	}
	return r.list, nil
}

func (c *Conn) write(ctx context.Context, a Action, failWith error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	deadline := time.Now().Add(c.cfg.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetWriteDeadline(deadline)
	err := c.w.WriteAction(a)
	if err == nil || errors.Is(err, ErrInvalidField) {
		return err
	}
	// A failed write leaves the stream in an unknown state: the connection is over.
	err = fmt.Errorf("ami action %s: %w", a.Name, err)
	if failWith != nil {
		err = fmt.Errorf("%w: %w", failWith, err)
	}
	c.fail(err)
	return err
}

func (c *Conn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// fail records the first reason the connection ended and closes the socket, which ends the read
// loop.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	_ = c.nc.Close()
}

func (c *Conn) readLoop() {
	defer c.wg.Done()
	for {
		m, err := c.r.ReadMessage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // Asterisk went away: the session did not end cleanly
			}
			c.fail(fmt.Errorf("ami read: %w", err))
			break
		}
		c.dispatch(m)
	}
	c.cancel()
	c.qmu.Lock()
	c.readerDone = true
	c.qcond.Broadcast()
	c.qmu.Unlock()
	close(c.done)
}

// dispatch hands m to the action waiting for it, or queues it for Events.
func (c *Conn) dispatch(m Message) {
	if id := m.ActionID(); id != "" {
		c.mu.Lock()
		cl := c.pending[id]
		switch {
		case cl == nil:
		case cl.response == nil && m.IsResponse() && !m.IsEvent():
			cl.response = &m
			if !cl.list || !listStarts(m) {
				delete(c.pending, id)
				c.mu.Unlock()
				cl.done <- callResult{list: List{Response: m}}
				return
			}
			c.mu.Unlock()
			return
		case cl.response != nil && cl.list && m.IsEvent():
			if listEnds(m) {
				delete(c.pending, id)
				c.mu.Unlock()
				cl.done <- callResult{list: List{Response: *cl.response, Items: cl.items, Complete: m}}
				return
			}
			cl.items = append(cl.items, m)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
	if !m.IsEvent() {
		// A response nobody waits for: its caller gave up (context ended) or it never asked.
		c.log.Debug("ami response to no waiting action", slog.String("actionid", m.ActionID()),
			slog.String("response", m.Response()))
		return
	}
	c.enqueue(m)
}

func listStarts(resp Message) bool {
	return strings.EqualFold(resp.Get("EventList"), "start") ||
		strings.HasSuffix(strings.ToLower(resp.Get("Message")), "will follow")
}

func listEnds(ev Message) bool {
	return strings.EqualFold(ev.Get("EventList"), "Complete") ||
		strings.HasSuffix(ev.Event(), "Complete")
}

// enqueue adds m to the queue for Events, waiting while the queue is full.
func (c *Conn) enqueue(m Message) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for len(c.queue) >= c.cfg.MaxQueuedEvents && !c.closing {
		c.qcond.Wait()
	}
	if c.closing {
		return
	}
	c.queue = append(c.queue, m)
	c.qcond.Broadcast()
}

func (c *Conn) deliverLoop() {
	defer c.wg.Done()
	defer close(c.events)
	for {
		c.qmu.Lock()
		for len(c.queue) == 0 && !c.readerDone && !c.closing {
			c.qcond.Wait()
		}
		if c.closing || len(c.queue) == 0 {
			c.qmu.Unlock()
			return
		}
		m := c.queue[0]
		c.queue[0] = Message{}
		c.queue = c.queue[1:]
		if len(c.queue) == 0 {
			c.queue = c.queue[:0:0]
		}
		c.qcond.Broadcast()
		c.qmu.Unlock()
		select {
		case c.events <- m:
		case <-c.closeReq:
			return
		}
	}
}

func (c *Conn) keepAlive() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		// A Ping whose write misses the ping's own deadline (the machine stalled, or the
		// socket's buffer is full) is unanswered as well: the connection ends with
		// ErrPingTimeout either way.
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.PingTimeout)
		_, err := c.do(ctx, Action{Name: "Ping"}, false, ErrPingTimeout)
		cancel()
		if err != nil && c.ctx.Err() == nil {
			c.log.Warn("ami keepalive failed", slog.String("error", err.Error()))
			if !errors.Is(err, ErrPingTimeout) { // a failed write says so already
				err = fmt.Errorf("%w: %w", ErrPingTimeout, err)
			}
			c.fail(err)
			return
		}
	}
}

// Close logs off (best effort, for at most two seconds), closes the connection and waits for
// its goroutines, or for ctx to end (then it returns ctx's error; the goroutines still end).
// Events is closed without delivering what was still queued. Close may be called more than once.
func (c *Conn) Close(ctx context.Context) error {
	first := false
	c.closeMu.Do(func() { first = true })
	if first {
		alive := true
		select {
		case <-c.done:
			alive = false // keep the reason it ended
		default:
			lctx, cancel := context.WithTimeout(ctx, logoffTimeout)
			_, _ = c.Do(lctx, Action{Name: "Logoff"})
			cancel()
		}
		close(c.closeReq)
		c.mu.Lock()
		if alive {
			c.err = ErrClosed // even when Logoff made Asterisk hang up first
		}
		c.mu.Unlock()
		c.fail(ErrClosed)
		c.cancel()
		c.qmu.Lock()
		c.closing = true
		c.qcond.Broadcast()
		c.qmu.Unlock()
	}
	finished := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close ami connection: %w", ctx.Err())
	}
}
