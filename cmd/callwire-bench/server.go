package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/server"
)

// serveProfiledCmd is the hidden first argument that makes this program act as the server (the
// same wiring as `callwire serve`) with a net/http/pprof listener beside it. The bench starts
// itself that way under -cpuprofile; the product binary never serves pprof.
const serveProfiledCmd = "serve-profiled"

// buildServer builds cmd/callwire into dir and returns the binary's path.
func buildServer(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "callwire")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/callwire/callwire/cmd/callwire")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/callwire: %w", err)
	}
	return bin, nil
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// child is the server under test, running as a child process.
type child struct {
	cmd       *exec.Cmd
	addr      string // host:port of the API
	pprofAddr string // host:port of pprof, or ""
	exited    chan struct{}
	waitErr   error
}

// childOptions say how to start the server.
type childOptions struct {
	// argv is the program and the arguments before the listen flag: {bin, "serve"} or
	// {self, serveProfiledCmd}.
	argv        []string
	databaseURL string
	// databasePath is the embedded store's file, when databaseURL is empty.
	databasePath string
	maxConns     int
	// redisURL is the Redis broker's; "" for the in-process broker.
	redisURL string
	dir      string // working directory
	profiled bool   // argv is serveProfiledCmd: also give it a pprof address
	// extraEnv are more NAME=value settings, after the bench's.
	extraEnv []string
}

// startServer starts the server on a free port of 127.0.0.1 and waits until /readyz answers 200.
func startServer(ctx context.Context, o childOptions) (*child, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("pick a port: %w", err)
	}
	c := &child{addr: "127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	args := append(o.argv[1:len(o.argv):len(o.argv)], "--listen", c.addr)
	if o.profiled {
		pport, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("pick a port: %w", err)
		}
		c.pprofAddr = "127.0.0.1:" + strconv.Itoa(pport)
		args = append(args, "--pprof", c.pprofAddr)
	}
	c.cmd = exec.Command(o.argv[0], args...)
	c.cmd.Env = o.env()
	c.cmd.Dir = o.dir
	c.cmd.Stdout = os.Stderr
	c.cmd.Stderr = os.Stderr
	setChildAttrs(c.cmd)
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// waitReady polls /readyz until it answers 200, the child exits, or the time is up.
func (c *child) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + c.addr + "/readyz"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited:
			return fmt.Errorf("server exited before it was ready: %v", c.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("server not ready on %s within %v", c.addr, limit)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for a graceful exit, killing the child after 20 seconds. It
// reports how the child exited.
func (c *child) stop() error {
	select {
	case <-c.exited:
		return fmt.Errorf("server had already exited: %v", c.waitErr)
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return c.waitErr
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("server did not stop within 20s of SIGTERM; killed")
	}
}

// running reports an error if the child has exited.
func (c *child) running() error {
	select {
	case <-c.exited:
		return fmt.Errorf("server exited during the bench: %v", c.waitErr)
	default:
		return nil
	}
}

// serveProfiled runs the server exactly as `callwire serve` wires it (configuration from the
// environment, the store it names, server.New, Run until ctx ends), plus net/http/pprof on the
// address of --pprof. args are the arguments after serveProfiledCmd.
func serveProfiled(ctx context.Context, args []string) error {
	var listen, pprofAddr string
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--listen":
			listen = args[i+1]
		case "--pprof":
			pprofAddr = args[i+1]
		default:
			return fmt.Errorf("%s: unknown argument %q", serveProfiledCmd, args[i])
		}
	}
	if listen == "" || pprofAddr == "" {
		return fmt.Errorf("%s: --listen and --pprof are required", serveProfiledCmd)
	}
	c, unknown, err := config.Load("", os.Environ(), nil, nil)
	if err != nil {
		return err
	}
	c.Server.Listen = listen
	log := server.NewLogger(c.Log, os.Stderr)
	for _, v := range unknown {
		v.Warn(log)
	}
	st, err := server.OpenStore(ctx, c.Database)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	server.ApplyMemoryLimit(c.Server, st, os.Getenv)
	srv, err := server.New(context.WithoutCancel(ctx), c, server.Options{Store: st, Logger: log})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
	pln, err := net.Listen("tcp", pprofAddr)
	if err != nil {
		return fmt.Errorf("pprof listen: %w", err)
	}
	ps := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ps.Serve(pln) }()
	defer ps.Close()

	return srv.Run(ctx, c.Server.Listen, nil)
}

// fetchProfile saves a CPU profile of the child's next d to path. It needs -cpuprofile (pprof
// served by the child).
func (c *child) fetchProfile(ctx context.Context, d time.Duration, path string) error {
	secs := int((d + time.Second - 1) / time.Second)
	url := "http://" + c.pprofAddr + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs)
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return fmt.Errorf("server profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("server profile: HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("server profile: %w", err)
	}
	return f.Close()
}

// env is the environment of a callwire process the bench runs: the caller's, without any of
// callwire's configuration variables (none of the caller's configuration leaks in), and the
// bench's settings.
func (o childOptions) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, config.EnvPrefix) {
			env = append(env, kv)
		}
	}
	env = append(env,
		config.EnvPrefix+"DATABASE_URL="+o.databaseURL,
		config.EnvPrefix+"DATABASE_PATH="+o.databasePath,
		config.EnvPrefix+"DATABASE_MAX_CONNS="+strconv.Itoa(o.maxConns),
		config.EnvPrefix+"LOG_LEVEL=warn",
		config.EnvPrefix+"LOG_FORMAT=json",
	)
	if o.redisURL != "" {
		env = append(env, config.EnvPrefix+"BROKER_REDIS_URL="+o.redisURL)
	}
	return append(env, o.extraEnv...)
}

// migrateWith applies the migrations of the callwire binary bin to the store of o, as
// `bin migrate` does.
func migrateWith(ctx context.Context, bin string, o childOptions) error {
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env, cmd.Dir = o.env(), o.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s migrate: %w: %s", bin, err, bytes.TrimSpace(out))
	}
	return nil
}
