package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	plugin "github.com/hashicorp/go-plugin"

	"github.com/callwire/callwire/sdk/event"
)

// TranslatorSpec says how to run one translator.
type TranslatorSpec struct {
	// Name identifies the translator in logs, in Status and to the Sink. Names are unique within
	// a Host.
	Name string
	// Command is the executable and its arguments: BuiltinCommand for a translator built into
	// the callwire binary, ExternalCommand for a third-party one, or any path. A name without a
	// slash is looked up on PATH at each launch.
	Command []string
	// Config is the translator's configuration, a JSON value handed to its Run. Empty means an
	// empty object.
	Config json.RawMessage
}

// HostOptions configures a Host. Zero durations take the defaults given.
type HostOptions struct {
	// Translators are the translators to run, each as its own process.
	Translators []TranslatorSpec
	// Sink receives every event the translators emit. Required.
	Sink Sink
	// Logger receives the host's log and every translator's, each line carrying the attribute
	// translator=<name>. Nil means slog.Default().
	Logger *slog.Logger

	// MinBackoff is the wait before the first restart of a translator that ended or could not be
	// started (default 1s). Each further restart waits twice as long, up to MaxBackoff (default
	// 1m). A translator that ran for at least ResetAfter (default 1m) before it ended starts again
	// from MinBackoff.
	MinBackoff, MaxBackoff, ResetAfter time.Duration
	// StartTimeout bounds a translator's launch and handshake (default 30s).
	StartTimeout time.Duration
	// HealthInterval is how often a running translator is asked for its health (default 30s), and
	// HealthTimeout bounds each answer (default 5s). The first question of a run comes as soon as
	// the translator has been handed its configuration, possibly before its Run has begun. The
	// next ones come closer together at first: the wait starts at 0.1s and doubles up to
	// HealthInterval (with the default, about 0.1s, 0.3s, 0.7s, 1.5s … 25.5s after the launch,
	// then every 30s). So a change of health early in a run, such as a translator logging in to
	// its phone system, is seen within about as long again as the run had lasted, not only after
	// a full interval.
	HealthInterval, HealthTimeout time.Duration
	// StopGrace is how long a translator asked to stop may take to end its Run, still having its
	// events taken, before its process is killed (default 5s).
	StopGrace time.Duration
	// GiveUpAfter, when positive, is how many runs in a row of one translator may end (or fail
	// to start) each within ResetAfter of its launch before the translator is taken to keep
	// failing: restarting it once more would not help (its port is taken, its configuration is
	// refused, its executable is missing). Run then stops every translator, as when its context
	// ends, and returns a *FailingError. A run that lasted ResetAfter or longer starts the count
	// again. 0 restarts every translator forever.
	GiveUpAfter int
}

// FailingError is Host.Run's error when a translator keeps failing (see
// HostOptions.GiveUpAfter). Its message names the translator, its restarts and its last error.
type FailingError struct {
	// Name is the translator's name.
	Name string
	// Failures is how many runs in a row ended, each within Within of its launch.
	Failures int
	// Within is the run length under which a run counts as failed (HostOptions.ResetAfter).
	Within time.Duration
	// Restarts counts the launches after the first, as TranslatorStatus.Restarts.
	Restarts int
	// LastError is why the last run ended or could not start.
	LastError string
}

// Error implements error.
func (e *FailingError) Error() string {
	return fmt.Sprintf("translator %s keeps failing: its last %d runs each ended within %s of starting (%d restarts); last error: %s",
		e.Name, e.Failures, e.Within, e.Restarts, e.LastError)
}

// Host launches translators as child processes, hands their events to a Sink, restarts them when
// they end, and stops them all when its Run's context ends. Create it with NewHost.
type Host struct {
	opts    HostOptions
	log     *slog.Logger
	started atomic.Bool

	mu     sync.Mutex
	status []TranslatorStatus // in the order of opts.Translators
}

// healthRecheck is the first wait between a run's health checks, HostOptions.HealthInterval's
// 0.1s.
const healthRecheck = 100 * time.Millisecond

// TranslatorStatus is a snapshot of one translator, as Host.Status reports it.
//
// Its health goes through these states, each run from the first:
//
//   - not running (Running false, Healthy false): no process runs; before the first launch, and
//     from the end of a run until the next launch has handed the translator its configuration.
//   - starting (Running true, HealthChecked zero): the process has been handed its configuration
//     and the run's first health check, asked at once, has not answered yet.
//   - healthy (Running true, Healthy true): the last check answered healthy, or the translator
//     does not report its health.
//   - unhealthy (Running true, Healthy false, HealthChecked set): the last check answered with
//     a problem, or did not answer within HealthTimeout; HealthError says which.
//
// Healthy and unhealthy change only when a check answers: at once after each launch, then at the
// waits HostOptions.HealthInterval describes. What a translator answers while it is still
// connecting is its own: the Asterisk translator, for one, answers unhealthy until it has logged
// in to the manager, and reads healthy from the first check after that. The first check may reach
// a translator before its Run has begun, and what it answers then stands until the next check.
type TranslatorStatus struct {
	// Name is the translator's name from its spec.
	Name string
	// Running is true while a process of the translator is up and running its Run.
	Running bool
	// PID is the running process's id, 0 when none runs.
	PID int
	// Started is when the running process was launched; zero when none runs.
	Started time.Time
	// Restarts counts the launches after the first.
	Restarts int
	// LastError says why the translator last ended or failed to start; empty if it never has.
	LastError string
	// Healthy is true while the translator runs and its last health check passed, or it does not
	// report its health. It is false until the first check of each run has answered, and once
	// the run has ended.
	Healthy bool
	// HealthError is why the last health check failed; empty when it passed.
	HealthError string
	// HealthChecked is when the last health check answered; zero before the first.
	HealthChecked time.Time
}

// NewHost validates opts, applies the defaults and returns a Host ready to Run. It reports every
// problem with the options at once.
func NewHost(opts HostOptions) (*Host, error) {
	var errs []error
	if opts.Sink == nil {
		errs = append(errs, errors.New("no sink"))
	}
	seen := map[string]bool{}
	for i, t := range opts.Translators {
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("translator %d has no name", i))
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("translator %q is listed twice", t.Name))
		}
		seen[t.Name] = true
		if len(t.Command) == 0 || t.Command[0] == "" {
			errs = append(errs, fmt.Errorf("translator %q has no command", t.Name))
		}
		if len(t.Config) > 0 && !json.Valid(t.Config) {
			errs = append(errs, fmt.Errorf("translator %q: config is not valid JSON", t.Name))
		}
	}
	defaults := []struct {
		d    *time.Duration
		def  time.Duration
		name string
	}{
		{&opts.MinBackoff, time.Second, "MinBackoff"},
		{&opts.MaxBackoff, time.Minute, "MaxBackoff"},
		{&opts.ResetAfter, time.Minute, "ResetAfter"},
		{&opts.StartTimeout, 30 * time.Second, "StartTimeout"},
		{&opts.HealthInterval, 30 * time.Second, "HealthInterval"},
		{&opts.HealthTimeout, 5 * time.Second, "HealthTimeout"},
		{&opts.StopGrace, 5 * time.Second, "StopGrace"},
	}
	if opts.GiveUpAfter < 0 {
		errs = append(errs, errors.New("GiveUpAfter is negative"))
	}
	for _, d := range defaults {
		switch {
		case *d.d < 0:
			errs = append(errs, fmt.Errorf("%s is negative", d.name))
		case *d.d == 0:
			*d.d = d.def
		}
	}
	if opts.MaxBackoff < opts.MinBackoff {
		errs = append(errs, fmt.Errorf("MaxBackoff %s is less than MinBackoff %s", opts.MaxBackoff, opts.MinBackoff))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("translator host: %w", errors.Join(errs...))
	}
	opts.Translators = append([]TranslatorSpec(nil), opts.Translators...)
	h := &Host{opts: opts, log: opts.Logger}
	if h.log == nil {
		h.log = slog.Default()
	}
	for _, t := range opts.Translators {
		h.status = append(h.status, TranslatorStatus{Name: t.Name})
	}
	return h, nil
}

// Run runs every translator until ctx ends, then stops them all: each is asked to end its Run,
// given StopGrace to do so, and then its process is killed. Run returns nil once every process
// has exited and the Sink will not be called again. When a translator keeps failing (see
// HostOptions.GiveUpAfter) Run stops them all alike before ctx ends and returns a *FailingError
// (the first, when several gave up at once). A Host runs once; a second Run returns an error.
func (h *Host) Run(ctx context.Context) error {
	if !h.started.CompareAndSwap(false, true) {
		return errors.New("translator host: already run")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		failOnce sync.Once
		failed   error
	)
	for i := range h.opts.Translators {
		wg.Go(func() {
			if err := h.supervise(ctx, i); err != nil {
				failOnce.Do(func() { failed = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return failed
}

// Status returns a snapshot of every translator, in the order of HostOptions.Translators.
func (h *Host) Status() []TranslatorStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]TranslatorStatus(nil), h.status...)
}

func (h *Host) update(i int, f func(*TranslatorStatus)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.status[i])
}

// supervise runs translator i again and again, with backoff, until ctx ends, or until it keeps
// failing, which it returns as a *FailingError.
func (h *Host) supervise(ctx context.Context, i int) error {
	spec := h.opts.Translators[i]
	log := h.log.With("translator", spec.Name)
	backoff := h.opts.MinBackoff
	streak := 0 // runs in a row that ended within ResetAfter
	for launch := 0; ; launch++ {
		if launch > 0 {
			h.update(i, func(s *TranslatorStatus) { s.Restarts++ })
		}
		began := time.Now()
		err := h.runOnce(ctx, i, log)
		if ctx.Err() != nil {
			log.Info("translator stopped")
			return nil
		}
		ran := time.Since(began)
		if ran >= h.opts.ResetAfter {
			backoff = h.opts.MinBackoff
			streak = 0
		} else {
			streak++
		}
		if err == nil {
			err = errors.New("translator ended its run without being asked to")
		}
		var restarts int
		h.update(i, func(s *TranslatorStatus) { s.LastError, restarts = err.Error(), s.Restarts })
		if h.opts.GiveUpAfter > 0 && streak >= h.opts.GiveUpAfter {
			fe := &FailingError{Name: spec.Name, Failures: streak, Within: h.opts.ResetAfter, Restarts: restarts, LastError: err.Error()}
			log.Error("translator keeps failing; giving up", "error", err, "failures", streak, "restarts", restarts)
			return fe
		}
		log.Error("translator ended; restarting it", "error", err, "ran", ran.Round(time.Millisecond), "restart_in", backoff)
		wait := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			wait.Stop()
			log.Info("translator stopped")
			return nil
		case <-wait.C:
		}
		backoff = min(backoff*2, h.opts.MaxBackoff)
	}
}

// runOnce launches translator i, runs it until it ends or ctx ends, and makes sure its process is
// gone before returning. It returns why the translator ended; after ctx has ended the result does
// not matter.
func (h *Host) runOnce(ctx context.Context, i int, log *slog.Logger) error {
	spec := h.opts.Translators[i]
	if _, err := exec.LookPath(spec.Command[0]); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	setProcAttr(cmd)
	handshake, plugins := pluginConfig()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  handshake,
		Plugins:          plugins,
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newHostLogger(ctx, log),
		Managed:          false,
		StartTimeout:     h.opts.StartTimeout,
		SyncStdout: &lineWriter{line: func(s string) {
			log.Warn("translator wrote to stdout, which is reserved for the protocol; use log/slog", "line", s)
		}},
		SyncStderr: &lineWriter{line: func(s string) { log.Info(s) }},
	})
	defer client.Kill()

	rpc, err := client.Client()
	if err != nil {
		return startError(spec.Command[0], err)
	}
	tc, err := dispense(rpc)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if ctx.Err() != nil {
		return nil
	}
	pid := 0
	if rc := client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}

	// The run outlives ctx by the grace period: events emitted while stopping are still taken.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	config := spec.Config
	if len(config) == 0 {
		config = json.RawMessage(`{}`)
	}
	stream, err := tc.run(runCtx, config)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	h.update(i, func(s *TranslatorStatus) {
		s.Running, s.PID, s.Started = true, pid, time.Now()
		s.Healthy, s.HealthError, s.HealthChecked = false, "", time.Time{}
	})
	defer h.update(i, func(s *TranslatorStatus) {
		s.Running, s.PID, s.Started, s.Healthy = false, 0, time.Time{}, false
	})
	log.Info("translator started", "pid", pid)

	result := make(chan error, 1)
	go func() { result <- h.pump(runCtx, spec.Name, stream, log) }()
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		h.pollHealth(runCtx, i, tc, log)
	}()

	var runErr error
	select {
	case runErr = <-result:
	case <-ctx.Done():
		if err := stream.stop(); err != nil {
			log.Debug("could not ask translator to stop", "error", err)
		}
		grace := time.NewTimer(h.opts.StopGrace)
		select {
		case runErr = <-result:
			grace.Stop()
		case <-grace.C:
			log.Warn("translator did not stop within its grace period; killing it", "grace", h.opts.StopGrace)
			cancelRun()
			runErr = <-result
		}
	}
	cancelRun()
	<-healthDone
	return runErr
}

// pump reads the translator's messages until its run ends, hands each event to the sink and
// answers it. It returns the translator's own error when it said it was done, and otherwise why
// the stream broke.
func (h *Host) pump(ctx context.Context, name string, stream runStream, log *slog.Logger) error {
	for {
		m, err := stream.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("translator closed its run without saying it was done")
			}
			return fmt.Errorf("translator process exited or lost its connection: %w", err)
		}
		if m.event == nil {
			if m.doneErr != "" {
				return fmt.Errorf("translator returned: %s", m.doneErr)
			}
			return nil
		}
		if err := stream.ack(h.accept(ctx, name, m.event, log)); err != nil {
			return fmt.Errorf("translator process exited or lost its connection: %w", err)
		}
	}
}

// accept decodes and validates one emitted event and hands it to the sink. An invalid event is
// refused with its problems and never reaches the sink.
func (h *Host) accept(ctx context.Context, name string, ev *emitted, log *slog.Logger) eventAck {
	ack := eventAck{id: ev.id}
	valid, err := event.ParseOne(ev.json)
	if err != nil {
		ack.err = "invalid event: " + err.Error()
		if ve, ok := event.AsValidationError(err); ok {
			ack.problems = ve.Problems
		}
		log.Warn("translator emitted an invalid event; refused", "problems", err.Error())
		return ack
	}
	if err := h.opts.Sink.Accept(ctx, name, valid); err != nil {
		ack.err = err.Error()
		if ack.err == "" {
			ack.err = "refused"
		}
		log.Warn("sink refused an event", "error", err)
	}
	return ack
}

// pollHealth asks the translator for its health at once, then after waits that start at
// healthRecheck and double up to HealthInterval, until ctx ends, recording the answers and
// logging changes. A translator's health changes most while it starts (it connects to its phone
// system then), so the checks are closest together there; the wait is measured from one answer
// to the next question, so a slow answer never makes checks pile up.
func (h *Host) pollHealth(ctx context.Context, i int, tc conn, log *slog.Logger) {
	wait := min(healthRecheck, h.opts.HealthInterval)
	next := time.NewTimer(wait) // reset after each answer, before it is waited on
	defer next.Stop()
	first, was := true, false
	for {
		cctx, cancel := context.WithTimeout(ctx, h.opts.HealthTimeout)
		problem, err := tc.health(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			problem = "health check failed: " + err.Error()
		}
		healthy := problem == ""
		h.update(i, func(s *TranslatorStatus) {
			s.Healthy, s.HealthError, s.HealthChecked = healthy, problem, time.Now()
		})
		switch {
		case !healthy && (first || was):
			log.Warn("translator is unhealthy", "reason", problem)
		case healthy && !first && !was:
			log.Info("translator is healthy again")
		}
		first, was = false, healthy
		next.Reset(wait)
		wait = min(wait*2, h.opts.HealthInterval)
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
	}
}

// startError explains why a translator could not be started, on one line.
func startError(path string, err error) error {
	text := err.Error()
	switch {
	case strings.Contains(text, "incompatible API version"):
		return fmt.Errorf("handshake: translator speaks another protocol version than this agent's %d: %w", protocolVersion, err)
	case strings.Contains(text, "Unrecognized remote plugin message"), strings.Contains(text, "exited before we could connect"):
		lines := strings.Split(strings.TrimSpace(text), "\n")
		first := strings.TrimSpace(lines[0])
		if strings.HasSuffix(first, ":") && len(lines) > 1 {
			first += " " + strings.TrimSpace(lines[1])
		}
		return &wrapped{
			msg: fmt.Sprintf("start: %s did not answer the translator handshake (is it a callwire translator, serving with translator.Serve?): %s", path, first),
			err: err,
		}
	}
	return fmt.Errorf("start: %w", err)
}

// wrapped is an error with a message of its own that still unwraps to the error it explains.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
