package filelock_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/callwire/callwire/sdk/filelock"
)

// TestOneHolder: a second Lock of the same path fails with ErrHeld until the first is closed.
func TestOneHolder(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no advisory locks here")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := filelock.Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := filelock.Lock(path); !errors.Is(err, filelock.ErrHeld) {
		t.Fatalf("second lock: %v, want ErrHeld", err)
	}
	f.Close()
	g, err := filelock.Lock(path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	g.Close()
}

// TestKilledHolderReleases: a process killed with SIGKILL while it holds the lock leaves it free.
func TestKilledHolderReleases(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no advisory locks here")
	}
	if os.Getenv("FILELOCK_HOLD") != "" {
		if _, err := filelock.Lock(os.Getenv("FILELOCK_HOLD")); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		select {}
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledHolderReleases$")
	cmd.Env = append(os.Environ(), "FILELOCK_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child: %q, %v", buf, err)
	}
	if _, err := filelock.Lock(path); !errors.Is(err, filelock.ErrHeld) {
		t.Fatalf("lock while the child holds it: %v, want ErrHeld", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	f, err := filelock.Lock(path)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	f.Close()
}
