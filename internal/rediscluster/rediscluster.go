// Package rediscluster runs a Redis Cluster of local redis-server processes for tests: six nodes
// (three masters, each with one replica) on free loopback ports, in a directory of the caller's,
// made with redis-cli --cluster create. Nodes can be killed (SIGKILL) and started again, so that a
// test can fail over a master. It needs the redis-server and redis-cli programs (Redis 7 or
// later: the nodes are given their cluster bus port explicitly).
package rediscluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a cluster. Zero values take the documented defaults.
type Options struct {
	// Dir holds each node's directory (its nodes.conf and log). Required.
	Dir string
	// NodeTimeout is the nodes' cluster-node-timeout: how long a master may not answer before
	// its replica takes over. Default 1s.
	NodeTimeout time.Duration
}

// Cluster is a running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts  Options
	nodes []*Node
}

// Node is one redis-server of a cluster.
type Node struct {
	// Port is the node's client port on 127.0.0.1; BusPort its cluster bus port.
	Port, BusPort int
	dir           string
	timeout       time.Duration

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Masters and ReplicasPerMaster are the cluster's shape.
const (
	Masters           = 3
	ReplicasPerMaster = 1
)

// Start runs six redis-server processes with cluster mode on, joins them with redis-cli
// --cluster create (three masters, one replica each), and returns once every node reports
// cluster_state:ok and every replica is in sync with its master, or with an error when ctx ends
// first or a program fails. The caller closes the cluster, also after an error (Close stops what
// was started).
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Dir == "" {
		return nil, errors.New("rediscluster: a directory is required")
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = time.Second
	}
	n := Masters * (1 + ReplicasPerMaster)
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o}
	for i := range n {
		node := &Node{Port: ports[2*i], BusPort: ports[2*i+1], dir: filepath.Join(o.Dir, "node"+strconv.Itoa(i)), timeout: o.NodeTimeout}
		if err := os.MkdirAll(node.dir, 0o755); err != nil {
			return c, fmt.Errorf("rediscluster: %w", err)
		}
		c.nodes = append(c.nodes, node)
		if err := node.Start(ctx); err != nil {
			return c, err
		}
	}
	args := []string{"--cluster", "create"}
	for _, node := range c.nodes {
		args = append(args, node.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(ReplicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return c, fmt.Errorf("rediscluster: redis-cli --cluster create: %w\n%s", err, out)
	}
	return c, c.WaitOK(ctx)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("rediscluster: find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Nodes returns the cluster's nodes, in the order they were created.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Addrs returns every node's host:port.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URLs returns every node's redis:// URL.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = "redis://" + n.Addr()
	}
	return urls
}

// WaitOK returns once every running node reports cluster_state:ok, agrees on which node serves
// each slot, and every running replica's link to its master is up; or with an error when ctx
// ends first, naming what was still missing.
func (c *Cluster) WaitOK(ctx context.Context) error {
	var last error
	for {
		if last = c.ok(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rediscluster: cluster not ready: %w (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ok reports what keeps the cluster from being ready, or nil.
func (c *Cluster) ok(ctx context.Context) error {
	var masters string
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		info, err := n.Cmd(ctx, "cluster", "info")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("node %s: cluster state is not ok", n.Addr())
		}
		nodes, err := n.Cmd(ctx, "cluster", "nodes")
		if err != nil {
			return err
		}
		m := mastersOf(nodes)
		if masters == "" {
			masters = m
		} else if m != masters {
			return fmt.Errorf("node %s sees the masters %s, another %s", n.Addr(), m, masters)
		}
		repl, err := n.Cmd(ctx, "info", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("replica %s is not in sync with its master", n.Addr())
		}
	}
	return nil
}

// mastersOf returns, from CLUSTER NODES output, the addresses of the masters that serve slots,
// with their slots, sorted as listed: enough to compare two nodes' views.
func mastersOf(nodes string) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(nodes))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		lines = append(lines, addr+" "+strings.Join(f[8:], " "))
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}

// MasterOf returns the node that serves key's slot now, as a running node sees it.
func (c *Cluster) MasterOf(ctx context.Context, key string) (*Node, error) {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		slotText, err := n.Cmd(ctx, "cluster", "keyslot", key)
		if err != nil {
			return nil, err
		}
		slot, err := strconv.Atoi(strings.TrimSpace(slotText))
		if err != nil {
			return nil, fmt.Errorf("rediscluster: cluster keyslot %q: %q", key, slotText)
		}
		nodes, err := n.Cmd(ctx, "cluster", "nodes")
		if err != nil {
			return nil, err
		}
		return c.servingSlot(nodes, slot)
	}
	return nil, errors.New("rediscluster: no node is running")
}

// Masters returns the masters that serve slots, as a running node sees them.
func (c *Cluster) Masters(ctx context.Context) ([]*Node, error) {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		nodes, err := n.Cmd(ctx, "cluster", "nodes")
		if err != nil {
			return nil, err
		}
		var masters []*Node
		for _, line := range strings.Split(mastersOf(nodes), "; ") {
			addr, _, _ := strings.Cut(line, " ")
			for _, m := range c.nodes {
				if m.Addr() == addr {
					masters = append(masters, m)
				}
			}
		}
		return masters, nil
	}
	return nil, errors.New("rediscluster: no node is running")
}

// Slot returns the hash slot of key, as the cluster computes it.
func (c *Cluster) Slot(ctx context.Context, key string) (int, error) {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		out, err := n.Cmd(ctx, "cluster", "keyslot", key)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(out))
	}
	return 0, errors.New("rediscluster: no node is running")
}

// MoveSlot hands slot, which must hold no keys, from the master serving it to the master to,
// as a resharding does for each slot it moves: IMPORTING on to, MIGRATING on the owner, then
// every master is told the new owner. It returns once every node reports
// cluster_state:ok again.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, to *Node) error {
	s := strconv.Itoa(slot)
	var from *Node
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		nodes, err := n.Cmd(ctx, "cluster", "nodes")
		if err != nil {
			return err
		}
		from, err = c.servingSlot(nodes, slot)
		if err != nil {
			return err
		}
		break
	}
	if from == nil {
		return errors.New("rediscluster: no node is running")
	}
	fromID, err := from.Cmd(ctx, "cluster", "myid")
	if err != nil {
		return err
	}
	toID, err := to.Cmd(ctx, "cluster", "myid")
	if err != nil {
		return err
	}
	fromID, toID = strings.TrimSpace(fromID), strings.TrimSpace(toID)
	if _, err := to.Cmd(ctx, "cluster", "setslot", s, "importing", fromID); err != nil {
		return err
	}
	if _, err := from.Cmd(ctx, "cluster", "setslot", s, "migrating", toID); err != nil {
		return err
	}
	masters, err := c.Masters(ctx)
	if err != nil {
		return err
	}
	// The new owner first, then the old, then the other masters; replicas learn it from them.
	for _, n := range append([]*Node{to, from}, masters...) {
		if _, err := n.Cmd(ctx, "cluster", "setslot", s, "node", toID); err != nil {
			return err
		}
	}
	return c.WaitOK(ctx)
}

// servingSlot returns the node that CLUSTER NODES output says serves slot.
func (c *Cluster) servingSlot(nodes string, slot int) (*Node, error) {
	sc := bufio.NewScanner(strings.NewReader(nodes))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if found {
				b, _ = strconv.Atoi(hi)
			}
			if slot >= a && slot <= b {
				addr, _, _ := strings.Cut(f[1], "@")
				for _, m := range c.nodes {
					if m.Addr() == addr {
						return m, nil
					}
				}
				return nil, fmt.Errorf("rediscluster: slot %d is served by %s, not a node of this cluster", slot, addr)
			}
		}
	}
	return nil, fmt.Errorf("rediscluster: no master serves slot %d", slot)
}

// Close kills every node and waits for them to exit. It is safe to call more than once.
func (c *Cluster) Close() error {
	for _, n := range c.nodes {
		n.Kill()
	}
	return nil
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Start runs the node's redis-server (again, after Kill: it rejoins with its nodes.conf) and
// returns once it accepts connections, or with an error when it exits or ctx ends first.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("rediscluster: node %s is running already", n.Addr())
	}
	logPath := filepath.Join(n.dir, "redis.log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("rediscluster: %w", err)
	}
	defer out.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(n.Port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(n.BusPort),
		"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", strconv.FormatInt(n.timeout.Milliseconds(), 10),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", n.dir,
		// A master marked failed does not stop the other shards: with the default (yes) every
		// node refuses writes with CLUSTERDOWN until the failed master's replica takes over,
		// and the popups of every organization are missed meanwhile. See docs/popup.md, "On a
		// Redis Cluster".
		"--cluster-require-full-coverage", "no",
		// A replica's first sync starts at once, not after the default wait of 5s for more
		// replicas to share the transfer.
		"--repl-diskless-sync-delay", "0")
	cmd.Dir, cmd.Stdout, cmd.Stderr = n.dir, out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rediscluster: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n.cmd, n.exited = cmd, exited
	for {
		c, err := net.DialTimeout("tcp", n.Addr(), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			n.cmd = nil
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("rediscluster: redis-server %s exited at start:\n%s", n.Addr(), b)
		case <-ctx.Done():
			return fmt.Errorf("rediscluster: redis-server %s does not accept connections: %w", n.Addr(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill sends the node SIGKILL, as kill -9 does, and waits for it to exit. It does nothing to a
// node that is not running.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Cmd runs one command on the node with redis-cli and returns its output, or an error carrying
// the output when redis-cli fails or answers with an error.
func (n *Node) Cmd(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(n.Port)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("rediscluster: redis-cli -p %d %s: %w: %s", n.Port, strings.Join(args, " "), err, out.String())
	}
	s := out.String()
	if strings.HasPrefix(s, "ERR ") || strings.HasPrefix(s, "(error)") {
		return "", fmt.Errorf("rediscluster: redis-cli -p %d %s: %s", n.Port, strings.Join(args, " "), s)
	}
	return s, nil
}
