package haproxy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfig: every server is listed with its check, the stats page only when asked for, and,
// where HAProxy is installed, HAProxy itself accepts the configuration (haproxy -c).
func TestConfig(t *testing.T) {
	servers := []Server{{Name: "serve1", Addr: "127.0.0.1:8081"}, {Name: "serve2", Addr: "127.0.0.1:8082"}}
	for _, stats := range []string{"", "127.0.0.1:8404"} {
		cfg := Config("127.0.0.1:8080", servers, stats)
		for _, want := range []string{"bind 127.0.0.1:8080", "server serve1 127.0.0.1:8081 check", "server serve2 127.0.0.1:8082 check"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("config lacks %q:\n%s", want, cfg)
			}
		}
		if got := strings.Contains(cfg, "listen stats"); got != (stats != "") {
			t.Errorf("stats %q: stats page %v:\n%s", stats, got, cfg)
		}
		bin := Path()
		if bin == "" {
			continue
		}
		path := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c refused it: %v: %s\n%s", err, out, cfg)
		}
	}
}
