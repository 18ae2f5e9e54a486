// Package redistest runs a real redis-server for the tests and benchmarks
// of idem's Redis store: on 127.0.0.1 at a free port, with persistence off
// and its files in a temporary directory, stopped by the test binary's
// TestMain. Nothing is mocked.
//
// When redis-server is not installed, tests skip with a message saying
// how to install it — except in CI (the CI environment variable is set, as
// .ci/run does), where they fail: CI installs the Debian package
// redis-server, so a missing server there is a broken CI, not a reason to
// skip.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNotInstalled is returned by Start when redis-server is not on PATH.
var ErrNotInstalled = errors.New("redistest: redis-server not found on PATH (Debian: apt-get install redis-server)")

// Server is one redis-server child process.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string
	cmd  *exec.Cmd
	dir  string
	log  *os.File
}

// startTimeout bounds how long Start waits for the server to answer PING.
const startTimeout = 10 * time.Second

// Start starts a redis-server on a free loopback port and waits until it
// answers PING. A port taken between choosing and binding is retried with
// another one.
func Start() (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	var last error
	for range 3 {
		s, err := start(path)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

func start(path string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(path,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	)
	// Files, not writers: os/exec then starts no copying goroutines.
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, log: log}
	if err := s.waitReady(); err != nil {
		s.Stop()
		out, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return nil, fmt.Errorf("redistest: redis-server on %s: %w; log: %s", s.Addr, err, strings.TrimSpace(string(out)))
	}
	return s, nil
}

func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(s.Addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		// Signal 0 checks that the process is still alive: a server that
		// exited (port taken) will never answer.
		if s.cmd.Process.Signal(syscall.Signal(0)) != nil {
			return errors.New("redis-server exited")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop terminates the server, waits for it and removes its directory.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	s.log.Close()
	os.RemoveAll(s.dir)
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
	started   bool
)

// InCI reports whether the CI environment variable is set (to anything but
// "" , "0" or "false").
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}

// Addr returns the address of the test binary's shared server, starting it
// on first use. Without redis-server it skips tb — or fails it in CI (see
// the package comment). Call Stop from TestMain.
func Addr(tb testing.TB) string {
	tb.Helper()
	sharedMu.Lock()
	if !started {
		started = true
		shared, sharedErr = Start()
	}
	s, err := shared, sharedErr
	sharedMu.Unlock()
	if err == nil {
		return s.Addr
	}
	if errors.Is(err, ErrNotInstalled) && !InCI() {
		tb.Skipf("skipping Redis test: %v", err)
	}
	tb.Fatalf("Redis test needs a redis-server: %v", err)
	return ""
}

// Stop stops the shared server if Addr started one.
func Stop() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
	started = false
}
