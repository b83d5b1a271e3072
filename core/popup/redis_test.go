package popup_test

import (
	"testing"
	"time"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
)

func newRedis(t *testing.T, url string, o popup.RedisOptions) *popup.Redis {
	t.Helper()
	r, err := popup.NewRedis(t.Context(), url, o)
	if err != nil {
		t.Fatalf("redis broker: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRedisContract(t *testing.T) {
	url := popuptest.RedisURL(t)
	popuptest.Run(t, func(t *testing.T) popup.Broker {
		return newRedis(t, url, popup.RedisOptions{HealthInterval: time.Second})
	})
}
