package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Standby is a streaming replica of the database server named by EnvURL, made for one test by
// StartStandby: a copy taken with pg_basebackup -R into a temporary directory, run by the
// machine's own PostgreSQL binaries on a loopback port of its own. It replicates without a
// replication slot, so a standby that is stopped or killed never makes the primary keep WAL
// for it. It is read-only, as every standby is: a write sent to it fails.
type Standby struct {
	// Port is the standby's TCP port on 127.0.0.1.
	Port int
	bin  string // the directory of pg_ctl and postgres
	dir  string // the temporary directory; the data directory is dir/data
	as   string // the user that runs the server ("" for the test's own)
}

// StartStandby copies the server named by EnvURL with pg_basebackup -R and starts the copy as a
// hot standby, returning once it accepts connections. The standby is stopped and its directory
// removed in t.Cleanup.
//
// It skips t (or fails it, under EnvRequire=1) when EnvURL is unset, when the PostgreSQL
// binaries of the server's major version are not installed (/usr/lib/postgresql/N/bin, or
// pg_ctl on PATH), and when the server's pg_hba.conf does not allow a replication connection
// (the message says which line to add). Run as root, the server runs as the postgres user, as
// PostgreSQL refuses to run as root.
func StartStandby(t testing.TB) *Standby {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		skipOrFail(t, "this test needs PostgreSQL and "+EnvURL+" is not set")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	settings, err := primarySettings(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	bin := binDir(settings["server_version_num"])
	if bin == "" {
		skipOrFail(t, "no PostgreSQL binaries of major version "+majorOf(settings["server_version_num"])+
			" (looked in /usr/lib/postgresql/N/bin and for pg_ctl on PATH); the standby cannot be started")
	}
	s := &Standby{bin: bin}
	if os.Geteuid() == 0 {
		s.as = "postgres" // PostgreSQL refuses to run as root
	}
	s.dir, err = os.MkdirTemp("", "callwire-standby-")
	if err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(s.dir) })
	if s.as != "" {
		if err := chownTo(s.dir, s.as); err != nil {
			t.Fatalf("pgtest: standby: %v", err)
		}
	}
	data := filepath.Join(s.dir, "data")
	// The standby has a replication slot of its own, made before the copy: it keeps the primary
	// from recycling a WAL segment the copy or the standby has not streamed yet. Without one, a
	// copy taken while other tests write much (each dropped test database is a checkpoint) fails
	// with "requested WAL segment ... has already been removed". The slot is dropped when the
	// test ends; one left by a test process that died is dropped by the next standby made.
	slot, err := makeSlot(ctx, base, filepath.Base(s.dir))
	if err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	t.Cleanup(func() {
		// Runs after the standby's stop (cleanups run last first), when the slot is inactive.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropSlot(ctx, base, slot); err != nil {
			t.Errorf("pgtest: standby: %v", err)
		}
	})
	out, err := s.run(ctx, "pg_basebackup", "-d", base, "-D", data, "-R", "-X", "stream", "-S", slot,
		"--checkpoint=fast", "--no-sync")
	if err != nil {
		if strings.Contains(out, "no pg_hba.conf entry for replication connection") {
			skipOrFail(t, "the server's pg_hba.conf does not allow replication connections from this host, so no "+
				"standby can be copied from it; add a line such as \"host replication all 127.0.0.1/32 trust\" and "+
				"reload the server (.ci/services.sh does, with start=1). pg_basebackup said: "+strings.TrimSpace(out))
		}
		t.Fatalf("pgtest: standby: pg_basebackup: %v: %s", err, out)
	}
	if s.Port, err = freePort(); err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	if err := s.configure(data, settings); err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	t.Cleanup(func() {
		// The test's own context has ended by the time cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.stop(ctx, "fast")
	})
	if err := s.Start(ctx); err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	return s
}

// skipOrFail skips t with a loud message naming why, or fails it under EnvRequire=1.
func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal("pgtest: " + why + " (and " + EnvRequire + "=1 is set)")
	}
	t.Skip("pgtest: SKIPPING: " + why)
}

// Start starts the standby's server and waits until it accepts connections, at most until ctx
// ends. Use it again after Kill: the standby recovers and resumes streaming from the primary.
func (s *Standby) Start(ctx context.Context) error {
	data := filepath.Join(s.dir, "data")
	if out, err := s.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("start standby: %w: %s; log: %s", err, out, log)
	}
	return nil
}

// Kill stops the standby as a crash would: an immediate shutdown, with no checkpoint, which
// ends every connection at once. Start brings it back.
func (s *Standby) Kill(ctx context.Context) error {
	if out, err := s.stop(ctx, "immediate"); err != nil {
		return fmt.Errorf("kill standby: %w: %s", err, out)
	}
	return nil
}

// stop runs pg_ctl stop in mode (fast, immediate).
func (s *Standby) stop(ctx context.Context, mode string) (string, error) {
	return s.run(ctx, "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", mode, "-w", "-t", "60", "stop")
}

// URL returns u, a URL or key=value connection string of the primary (such as one URL
// returned), with its host and port replaced by the standby's.
func (s *Standby) URL(t testing.TB, u string) string {
	t.Helper()
	port := strconv.Itoa(s.Port)
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return u + " host=127.0.0.1 port=" + port // a later setting overrides an earlier one
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: standby url: %v", err)
	}
	parsed.Host = net.JoinHostPort("127.0.0.1", port)
	return parsed.String()
}

// configure writes the standby's own configuration into data: pg_basebackup copied the
// primary's data directory, which may not hold the primary's configuration (Debian keeps it in
// /etc). A hot standby needs some settings at least as large as the primary's.
func (s *Standby) configure(data string, primary map[string]string) error {
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"port = " + strconv.Itoa(s.Port),
		"unix_socket_directories = '" + s.dir + "'",
		"hot_standby = on",
		"fsync = off",
		"shared_buffers = 16MB",
		"logging_collector = off",
	}
	for _, name := range hotStandbyMinimums() {
		if v := primary[name]; v != "" {
			conf = append(conf, name+" = "+v)
		}
	}
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\n"
	files := map[string]string{"postgresql.conf": strings.Join(conf, "\n") + "\n", "pg_hba.conf": hba, "pg_ident.conf": ""}
	for name, body := range files {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			return err
		}
		if s.as != "" {
			if err := chownTo(p, s.as); err != nil {
				return err
			}
		}
	}
	return nil
}

// slotPrefix begins the name of every replication slot a standby of this package holds, followed
// by the process ID of the test that made it.
const slotPrefix = "callwire_standby_"

// makeSlot creates a physical replication slot on the primary at base, reserving WAL from now,
// named for this process and unique (its suffix from the standby's directory), after dropping
// the inactive slots of standbys whose test process is gone.
func makeSlot(ctx context.Context, base, unique string) (string, error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT slot_name FROM pg_replication_slots WHERE NOT active AND starts_with(slot_name, $1)`, slotPrefix)
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("list replication slots: %w", err)
	}
	for _, name := range stale {
		pid, _, _ := strings.Cut(strings.TrimPrefix(name, slotPrefix), "_")
		if _, err := os.Stat(filepath.Join("/proc", pid)); err == nil {
			continue // its test may still run
		}
		// Another test may drop it first; either way it is gone.
		_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, name)
	}
	var digits strings.Builder
	for _, r := range unique {
		if r >= '0' && r <= '9' {
			digits.WriteRune(r)
		}
	}
	name := fmt.Sprintf("%s%d_%s", slotPrefix, os.Getpid(), digits.String())
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true)`, name); err != nil {
		return "", fmt.Errorf("create replication slot %s: %w", name, err)
	}
	return name, nil
}

// dropSlot drops the replication slot name on the primary at base, if it is still there.
func dropSlot(ctx context.Context, base, name string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name); err != nil {
		return fmt.Errorf("drop replication slot %s: %w", name, err)
	}
	return nil
}

// hotStandbyMinimums returns the settings a hot standby refuses to run with below the primary's.
func hotStandbyMinimums() []string {
	return []string{"max_connections", "max_worker_processes", "max_wal_senders",
		"max_prepared_transactions", "max_locks_per_transaction"}
}

// primarySettings reads the server's version and hotStandbyMinimums.
func primarySettings(ctx context.Context, base string) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT name, setting FROM pg_settings WHERE name = ANY($1)`,
		append([]string{"server_version_num"}, hotStandbyMinimums()...))
	settings := map[string]string{}
	var name, setting string
	if _, err := pgx.ForEachRow(rows, []any{&name, &setting}, func() error {
		settings[name] = setting
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the primary's settings: %w", err)
	}
	return settings, nil
}

// majorOf returns the major version of a server_version_num (150020 is 15).
func majorOf(versionNum string) string {
	n, err := strconv.Atoi(versionNum)
	if err != nil {
		return "?"
	}
	return strconv.Itoa(n / 10000)
}

// binDir returns the directory of the PostgreSQL binaries of the server's major version, or "".
func binDir(versionNum string) string {
	dir := filepath.Join("/usr/lib/postgresql", majorOf(versionNum), "bin")
	if isFile(filepath.Join(dir, "pg_ctl")) && isFile(filepath.Join(dir, "pg_basebackup")) {
		return dir
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil && isFile(filepath.Join(filepath.Dir(p), "pg_basebackup")) {
		return filepath.Dir(p)
	}
	return ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// run runs the PostgreSQL program name with args, as s.as when set, and returns its output.
func (s *Standby) run(ctx context.Context, name string, args ...string) (string, error) {
	prog := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.as != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.as, "--", prog}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, prog, args...)
	}
	cmd.Dir = s.dir
	// pg_ctl start is given -l, so the server it leaves running writes to the log file and does
	// not hold the output's pipe open.
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// chownTo gives path to the user named name.
func chownTo(path, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("user %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("user %s: %w", name, err)
	}
	return os.Chown(path, uid, gid)
}

// freePort returns a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
