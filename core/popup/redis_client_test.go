package popup

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// TestClientSettings checks that the one-server and the cluster broker give their go-redis
// clients the same settings, taken from the broker's options: its timeouts, one retry, the
// caller's deadline honoured, and no extra handshake. Nothing listens on the URLs: a broker
// whose server does not answer starts down.
func TestClientSettings(t *testing.T) {
	o := RedisOptions{DialTimeout: 300 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 100 * time.Millisecond}
	one, err := NewRedis(t.Context(), "redis://127.0.0.1:1/0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	cluster, err := NewRedisCluster(t.Context(), []string{"redis://127.0.0.1:1"}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()

	type settings struct {
		dial, read, write, pool time.Duration
		retries                 int
		contextTimeout, noID    bool
		maint                   maintnotifications.Mode
	}
	ro := one.client.(*redis.Client).Options()
	co := cluster.client.(*redis.ClusterClient).Options()
	got := map[string]settings{
		"one server": {ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout, ro.MaxRetries,
			ro.ContextTimeoutEnabled, ro.DisableIdentity, ro.MaintNotificationsConfig.Mode},
		"cluster": {co.DialTimeout, co.ReadTimeout, co.WriteTimeout, co.PoolTimeout, co.MaxRetries,
			co.ContextTimeoutEnabled, co.DisableIdentity, co.MaintNotificationsConfig.Mode},
	}
	want := settings{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ReadTimeout, 1, true, true, maintnotifications.ModeDisabled}
	for name, s := range got {
		if s != want {
			t.Errorf("%s client: %+v, want %+v", name, s, want)
		}
	}
}
