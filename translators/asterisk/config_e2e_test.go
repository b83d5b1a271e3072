package asterisk_test

// Every form of address docs/asterisk.md allows, run by a real `callwire agent` with the
// built-in asterisk translator against a test manager: each logs in, is up at /metrics and is
// never restarted; every form the AMI client could not dial is refused when the agent starts,
// naming the key, with a non-zero exit.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/asterisk/ami/amitest"
)

// forward listens on addr and joins each connection to target, until the test ends. It reports
// false when addr cannot be listened on (taken, or no such interface here).
func forward(t *testing.T, addr, target string) bool {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() {
					_, _ = io.Copy(up, c)
					up.Close()
				}()
				_, _ = io.Copy(c, up)
			})
		}
	})
	return true
}

func TestEveryAddressFormLogsIn(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: "callwire", Secret: "s3cret", Lists: map[string][]ami.Message{"CoreShowChannels": nil}})
	_, port, _ := net.SplitHostPort(srv.Addr())
	forms := []string{`"127.0.0.1:` + port + `"`, `"localhost:` + port + `"`}
	if free, err := net.Listen("tcp", "[::1]:0"); err == nil {
		v6 := free.Addr().String()
		free.Close()
		if forward(t, v6, srv.Addr()) {
			forms = append(forms, `"`+v6+`"`)
		}
	} else {
		t.Log("no IPv6 loopback here: the [::1] form is not run")
	}
	if forward(t, "127.0.0.1:5038", srv.Addr()) {
		forms = append(forms, `"127.0.0.1"`, `"localhost"`, "") // "": the key left out, its default
	} else {
		t.Log("127.0.0.1:5038 is taken on this machine: the forms without a port are not run")
	}
	var yaml strings.Builder
	for i, f := range forms {
		fmt.Fprintf(&yaml, "  - name: a%d\n    builtin: asterisk\n    config:\n", i)
		if f != "" {
			fmt.Fprintf(&yaml, "      address: %s\n", f)
		}
		yaml.WriteString("      username: callwire\n      secret: s3cret\n      trunk_channels: [\"PJSIP/carrier-\"]\n      default_country: NL\n")
	}
	dir := t.TempDir()
	e2etest.AgentConfig(t, dir, "http://127.0.0.1:1", "cwid_unused", "cwsk_unused", yaml.String())
	a := e2etest.StartAgent(t, callwireBin, dir)
	// A translator is up once a health check finds it logged in: the first comes at its launch,
	// before the login, and the next ones soon after, closest together in the run's first
	// seconds (plugins.HostOptions.HealthInterval), so none waits for the 30-second interval.
	testwait.Until(t, 20*time.Second, fmt.Sprintf("all %d translators logged in and up", len(forms)), func() bool {
		return srv.Logins() >= len(forms) && a.Metric(t, "callwire_translator_up") == float64(len(forms))
	})
	if got := a.Metric(t, "callwire_translator_restarts_total"); got != 0 {
		t.Errorf("restarts: %v", got)
	}
	if n := len(a.TranslatorPIDs()); n != len(forms) {
		t.Errorf("%d launches for %d translators", n, len(forms))
	}
	if err := a.Proc.Stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("the agent exited with %v on SIGTERM", err)
	}
	if log := a.Proc.Log.String(); strings.Contains(log, "translator ended; restarting it") {
		t.Errorf("a translator was restarted:\n%s", log)
	}
}

func TestInvalidAddressFormsAreRefusedAtStart(t *testing.T) {
	cases := []struct{ address, want string }{
		{"tcp://127.0.0.1:5038", `translators[0].config.address: "tcp://127.0.0.1:5038" is a URL`},
		{"127.0.0.1:0", `translators[0].config.address: "127.0.0.1:0": port 0 is not a port to send to`},
		{"127.0.0.1:ami", `translators[0].config.address: "127.0.0.1:ami": port "ami" is not a number from 1 to 65535`},
		{"pbx$1", `translators[0].config.address: "pbx$1": "pbx$1" is neither an IP address nor a host name`},
		{"::1:5038:", `translators[0].config.address: "::1:5038:": is not an IPv6 address`},
	}
	for _, tc := range cases {
		t.Run(tc.address, func(t *testing.T) {
			dir := t.TempDir()
			e2etest.AgentConfig(t, dir, "http://127.0.0.1:1", "cwid_unused", "cwsk_unused", fmt.Sprintf(`  - name: bad
    builtin: asterisk
    config: {address: %q, username: callwire, secret: s3cret, default_country: NL}
`, tc.address))
			log := &e2etest.LogBuffer{}
			c := e2etest.StartChild(t, dir, log, nil, callwireBin, "agent", "--config", filepath.Join(dir, "agent.yaml"))
			select {
			case <-c.Done():
			case <-time.After(20 * time.Second):
				t.Fatalf("the agent still runs:\n%s", log.String())
			}
			var ee *exec.ExitError
			err := c.Stop(t, syscall.SIGKILL)
			if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(log.String(), tc.want) {
				t.Errorf("exit %v, stderr:\n%s\nwant a non-zero exit and %q", err, log.String(), tc.want)
			}
			if strings.Contains(log.String(), "translator started") {
				t.Errorf("a translator was started:\n%s", log.String())
			}
		})
	}
}
