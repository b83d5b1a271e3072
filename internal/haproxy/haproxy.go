// Package haproxy is the load balancer in front of several `callwire serve` replicas, as the
// cluster test (cmd/callwire/clustertest) and the scale bench (callwire-bench -scale) run it:
// where the program is, and the one configuration both use.
package haproxy

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Path returns the haproxy program's path (on PATH, or where Debian's package puts it), or ""
// when it is not installed.
func Path() string {
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// A Server is one replica behind the balancer.
type Server struct {
	// Name names it in HAProxy's stats; letters, digits, '-' and '_'.
	Name string
	// Addr is its host:port.
	Addr string
}

// Config returns HAProxy's configuration for servers, taking HTTP on bind (host:port): round
// robin over them, each checked on /readyz every 500ms (down after two failures, up after two
// successes); a request whose connection is refused is sent to another server. The client and
// server timeouts outlast the popup stream's heartbeat, so that an idle stream stays open; a
// server that stops answering a stream is cut after them. With stats not empty, the stats page
// is served there at /stats (its CSV at /stats;csv).
func Config(bind string, servers []Server, stats string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    maxconn 4096

defaults
    mode http
    option redispatch
    retries 3
    retry-on conn-failure
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 5s

frontend api
    bind %s
    default_backend serve

backend serve
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 2
`, bind)
	for _, s := range servers {
		fmt.Fprintf(&b, "    server %s %s check\n", s.Name, s.Addr)
	}
	if stats != "" {
		fmt.Fprintf(&b, `
listen stats
    bind %s
    stats enable
    stats uri /stats
`, stats)
	}
	return b.String()
}
