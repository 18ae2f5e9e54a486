package redisproc_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/readretry/readretry/internal/daemon"
	"github.com/readretry/readretry/internal/redistest/redisproc"
)

func TestMain(m *testing.M) { daemon.Main(m) }

// do sends one inline command on a new connection and returns the first
// reply line.
func do(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// TestKillRestartKeepsSnapshot: the lifecycle the fault tests rely on — a
// key saved with SAVE survives Kill and Restart on the same address; Kill
// refuses connections; a SIGSTOPped server is still stopped by Stop; Stop
// removes the directory.
func TestKillRestartKeepsSnapshot(t *testing.T) {
	s, err := redisproc.Start(nil)
	daemon.Require(t, "redis-server", "a redis-server", err, redisproc.ErrNotInstalled)
	defer s.Stop()
	if r, err := do(s.Addr, "SET k v"); err != nil || r != "+OK\r\n" {
		t.Fatalf("SET: %q %v", r, err)
	}
	if r, err := do(s.Addr, "SAVE"); err != nil || r != "+OK\r\n" {
		t.Fatalf("SAVE: %q %v", r, err)
	}
	s.Kill()
	if err := redisproc.Ping(s.Addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("PING after Kill: %v, want a refused connection", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if r, err := do(s.Addr, "GET k"); err != nil || r != "$1\r\nv\r\n" {
		t.Fatalf("GET after Restart: %q %v", r, err)
	}
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	s.Stop() // continues the stopped process (else SIGKILL after 5 s)
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("directory after Stop: %v", err)
	}
	if err := s.Signal(syscall.SIGCONT); err == nil {
		t.Fatal("Signal to a stopped server succeeded")
	}
}

// A server for one test, with an argument of its own. Needs redis-server
// on PATH, so it is compiled but not run by go test.
func ExampleStart() {
	s, err := redisproc.Start(func(dir string) ([]string, error) {
		return []string{"--maxmemory", "64mb"}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Stop()
	fmt.Println(redisproc.Ping(s.Addr))
}
