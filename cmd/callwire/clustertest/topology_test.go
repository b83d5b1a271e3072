package clustertest

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
	"github.com/callwire/callwire/internal/haproxy"
	"github.com/callwire/callwire/internal/rediscluster"
)

// Fault is one failure the run injects into a part of the topology, between two calm stretches
// of load. The run measures the window from the start of Inject to the end of Heal.
type Fault struct {
	// Name names the window in the report, such as "serve replica 2 killed".
	Name string
	// Inject breaks the part and returns once the break is in effect (a killed process reaped,
	// a load balancer that noticed).
	Inject func(ctx context.Context) error
	// Heal repairs the part and returns once it serves again.
	Heal func(ctx context.Context) error
	// Lossless says the fault must cost the desks nothing: an owed popup lost in its window
	// fails the run, as one lost outside the faults does.
	Lossless bool
}

// Store is the PostgreSQL the replicas share.
type Store interface {
	// Env is what a replica's environment needs to reach the store (CALLWIRE_DATABASE_*).
	Env() []string
	// Faults are the store's failures the run injects, in order, for the organization orgID.
	Faults(orgID string) []Fault
}

// Broker is the Redis the replicas publish popups through.
type Broker interface {
	// Env is what a replica's environment needs to reach the broker (CALLWIRE_BROKER_*).
	Env() []string
	// Faults are the broker's failures the run injects, in order, for the organization orgID.
	Faults(orgID string) []Fault
}

// standbyStore is a fresh schema of the PostgreSQL named by CALLWIRE_TEST_DATABASE_URL, the
// primary, and a streaming standby of it that serves the replicas' history reads
// (database.read_url).
type standbyStore struct {
	primary, read string
	standby       *pgtest.Standby
}

// startStore gives the run its store: a fresh schema, dropped when the test ends, and a standby
// copied from its server with pg_basebackup, stopped when the test ends.
func startStore(t *testing.T) Store {
	primary := pgtest.URL(t)
	sb := pgtest.StartStandby(t)
	return &standbyStore{primary: primary, read: sb.URL(t, primary), standby: sb}
}

func (s *standbyStore) Env() []string {
	return []string{"CALLWIRE_DATABASE_URL=" + s.primary, "CALLWIRE_DATABASE_READ_URL=" + s.read}
}

// Faults kills the standby (an immediate shutdown, as a crash), leaves it down for downTime
// while the replicas read from the primary, and starts it again.
func (s *standbyStore) Faults(string) []Fault {
	return []Fault{{
		Name: "PostgreSQL standby killed and restarted",
		Inject: func(ctx context.Context) error {
			if err := s.standby.Kill(ctx); err != nil {
				return err
			}
			return hold(ctx)
		},
		Heal: s.standby.Start,
	}}
}

// clusterBroker is a Redis Cluster of six nodes of the test's own.
type clusterBroker struct{ c *rediscluster.Cluster }

// startBroker gives the run its popup broker: a Redis Cluster of six nodes (three masters, one
// replica each) whose replicas take over within a second.
func startBroker(t *testing.T) Broker {
	return clusterBroker{c: popuptest.NewRedisCluster(t, time.Second)}
}

func (b clusterBroker) Env() []string {
	return []string{"CALLWIRE_BROKER_REDIS_CLUSTER_URLS=" + strings.Join(b.c.URLs(), ",")}
}

// Faults kills, with SIGKILL, first the master of another shard than the organization's, then
// the master that serves the organization's popups (their channels are hash-tagged by
// organization, so one shard holds them all); each time it waits until the replica has taken
// over, leaves the master down for downTime, then starts it again and waits until it has
// rejoined as a replica. The first must cost the organization's desks nothing: the broker's
// health is per shard.
func (b clusterBroker) Faults(orgID string) []Fault {
	var master, other *rediscluster.Node
	return []Fault{{
		Name:     "Redis master of another shard killed, failed over",
		Lossless: true,
		Inject: func(ctx context.Context) error {
			own, err := b.c.MasterOf(ctx, popup.ClusterChannel(orgID, "front-desk"))
			if err != nil {
				return err
			}
			masters, err := b.c.Masters(ctx)
			if err != nil {
				return err
			}
			for _, m := range masters {
				if m != own {
					other = m
					break
				}
			}
			if other == nil {
				return fmt.Errorf("no master other than %s", own.Addr())
			}
			other.Kill()
			if err := b.c.WaitOK(ctx); err != nil {
				return err
			}
			return hold(ctx)
		},
		Heal: func(ctx context.Context) error {
			if err := other.Start(ctx); err != nil {
				return err
			}
			return b.c.WaitOK(ctx)
		},
	}, {
		Name: "Redis master of the popups killed, failed over",
		Inject: func(ctx context.Context) error {
			var err error
			// The broker's channel on a cluster, hash-tagged by organization. popup.Channel, a
			// single server's name, has no hash tag: its slot is another's, often on another
			// shard, whose master's death would end no stream and test another fault.
			if master, err = b.c.MasterOf(ctx, popup.ClusterChannel(orgID, "front-desk")); err != nil {
				return err
			}
			master.Kill()
			if err := b.c.WaitOK(ctx); err != nil {
				return err
			}
			return hold(ctx)
		},
		Heal: func(ctx context.Context) error {
			if err := master.Start(ctx); err != nil {
				return err
			}
			return b.c.WaitOK(ctx)
		},
	}}
}

// hold waits downTime, the time a broken part stays down once the rest has noticed, so that the
// load runs without it; it returns early when ctx ends.
func hold(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(downTime):
		return nil
	}
}

// freeAddr returns a loopback host:port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// replica is one `callwire serve` process of the topology, on a fixed address so that it can be
// killed and started again in place.
type replica struct {
	name string
	addr string
	dir  string
	env  []string
	proc *e2etest.Child
}

// url is the replica's base URL.
func (r *replica) url() string { return "http://" + r.addr }

// start starts the replica's process and waits until its /readyz answers 200.
func (r *replica) start(t *testing.T, ctx context.Context) error {
	r.proc = e2etest.StartChild(t, r.dir, &e2etest.LogBuffer{}, r.env, callwireBin, "serve", "--listen", r.addr)
	client := &http.Client{Timeout: 2 * time.Second}
	return poll(ctx, 60*time.Second, r.name+" to answer /readyz 200", func() (bool, error) {
		select {
		case <-r.proc.Done():
			return false, fmt.Errorf("%s exited before it was ready", r.name)
		default:
		}
		return httpStatus(ctx, client, r.url()+"/readyz") == http.StatusOK, nil
	})
}

// kill ends the replica's process with SIGKILL and waits until it is reaped.
func (r *replica) kill(ctx context.Context) error {
	r.proc.Signal(syscall.SIGKILL)
	select {
	case <-r.proc.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s not reaped after SIGKILL: %w", r.name, ctx.Err())
	}
}

// loadBalancer is the HAProxy in front of the replicas.
type loadBalancer struct {
	addr      string // the frontend's host:port
	statsAddr string // the stats page's host:port
	proc      *e2etest.Child
}

// url is the frontend's base URL.
func (lb *loadBalancer) url() string { return "http://" + lb.addr }

// startLoadBalancer writes HAProxy's configuration for the replicas into a temporary directory,
// checks it, starts HAProxy in the foreground and waits until it sees every replica up.
func startLoadBalancer(t *testing.T, ctx context.Context, bin string, replicas []*replica) *loadBalancer {
	t.Helper()
	dir := t.TempDir()
	lb := &loadBalancer{addr: freeAddr(t), statsAddr: freeAddr(t)}
	servers := make([]haproxy.Server, len(replicas))
	for i, r := range replicas {
		servers[i] = haproxy.Server{Name: r.name, Addr: r.addr}
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxy.Config(lb.addr, servers, lb.statsAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, bin, "-c", "-q", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	lb.proc = e2etest.StartChild(t, dir, &e2etest.LogBuffer{}, nil, bin, "-db", "-f", cfg)
	for _, r := range replicas {
		if err := lb.waitStatus(ctx, r.name, "UP"); err != nil {
			t.Fatal(err)
		}
	}
	return lb
}

// status returns HAProxy's view of each server of the backend: UP, DOWN, or a transition such
// as "UP 1/2".
func (lb *loadBalancer) status(ctx context.Context) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+lb.statsAddr+"/stats;csv", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := csv.NewReader(bufio.NewReader(resp.Body))
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("haproxy stats: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimPrefix(strings.TrimSpace(h), "# ")] = i
	}
	px, sv, st := col["pxname"], col["svname"], col["status"]
	if st == 0 {
		return nil, errors.New("haproxy stats: no status column")
	}
	out := map[string]string{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("haproxy stats: %w", err)
		}
		if len(rec) > st && rec[px] == "serve" && rec[sv] != "FRONTEND" && rec[sv] != "BACKEND" {
			out[rec[sv]] = rec[st]
		}
	}
}

// waitStatus polls HAProxy's stats until it reports the server as want (UP or DOWN).
func (lb *loadBalancer) waitStatus(ctx context.Context, server, want string) error {
	last := ""
	err := poll(ctx, 30*time.Second, "haproxy to see "+server+" "+want, func() (bool, error) {
		select {
		case <-lb.proc.Done():
			return false, errors.New("haproxy exited")
		default:
		}
		st, err := lb.status(ctx)
		if err != nil {
			return false, nil
		}
		last = st[server]
		return last == want, nil
	})
	if err != nil {
		return fmt.Errorf("%w (haproxy last said %q)", err, last)
	}
	return nil
}

// poll calls cond every 50ms until it holds or fails, ctx ends, or limit passes.
func poll(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: gave up after %v", what, limit)
		case <-tick.C:
		}
	}
}

// httpStatus returns the status of a GET of url, or 0 when there was no answer.
func httpStatus(ctx context.Context, c *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// cli runs `callwire args...` with env and returns its standard output.
func cli(t *testing.T, ctx context.Context, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, callwireBin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("callwire %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// replicaName is the name of the i-th replica (from 0), as HAProxy and the report know it.
func replicaName(i int) string { return "serve" + strconv.Itoa(i+1) }
