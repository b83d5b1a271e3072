package popuptest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/rediscluster"
)

// NewRedisCluster starts a Redis Cluster of the test's own (see internal/rediscluster: six
// redis-server processes on free loopback ports, three masters with one replica each, the given
// cluster-node-timeout, no persistence) and returns it ready: every node reports
// cluster_state:ok. The cluster is stopped when the test ends; when the test failed, the nodes'
// logs are written to its log.
//
// It skips t with a loud message when redis-server or redis-cli is not on PATH, unless
// EnvRequire=1 is set and redis-server is there: then a missing redis-cli fails t. It fails t
// when the cluster does not come up within a minute.
func NewRedisCluster(t testing.TB, nodeTimeout time.Duration) *rediscluster.Cluster {
	t.Helper()
	_, serverErr := exec.LookPath("redis-server")
	_, cliErr := exec.LookPath("redis-cli")
	if serverErr != nil || cliErr != nil {
		const why = "this test needs the redis-server and redis-cli programs on PATH (Debian: apt-get install redis-server)"
		if os.Getenv(EnvRequire) == "1" && serverErr == nil {
			t.Fatal("popuptest: " + why + ", and " + EnvRequire + "=1")
		}
		t.Skip("popuptest: SKIPPING: " + why)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
	defer cancel()
	c, err := rediscluster.Start(ctx, rediscluster.Options{Dir: dir, NodeTimeout: nodeTimeout})
	t.Cleanup(func() {
		if c != nil {
			c.Close()
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*", "redis.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	if err != nil {
		t.Fatalf("popuptest: start a redis cluster: %v", err)
	}
	return c
}
