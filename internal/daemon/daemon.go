// Package daemon holds what idem's test servers (internal/redistest's
// redis-server and Redis Cluster, internal/sqltest's PostgreSQL and
// MariaDB) share: a free loopback port, stopping a server process, one
// server per test binary, the rule that a test without its server skips —
// except in CI, where it fails — and the TestMain that stops the servers
// and then looks for leaked goroutines.
package daemon

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// FreePort returns a loopback port nothing listens on at the moment. A
// server may still lose it to another process before it binds; callers
// retry with another port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// Stop sends cmd's process SIGTERM and waits for it to exit, killing it
// if it has not after grace. A command never started is left alone.
func Stop(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// InCI reports whether the CI environment variable is set (to anything but
// "", "0" or "false"), as .ci/run sets it.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}

// Require ends tb unless err is nil: it skips tb ("skipping <what> test")
// if err wraps notInstalled and this is not CI, and fails it ("<what> test
// needs <needs>") otherwise. CI installs the servers, so a missing one
// there is a broken CI, not a reason to skip.
func Require(tb testing.TB, what, needs string, err, notInstalled error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, notInstalled) && !InCI() {
		tb.Skipf("skipping %s test: %v", what, err)
	}
	tb.Fatalf("%s test needs %s: %v", what, needs, err)
}

// Shared is a server of type T that a test binary starts on first use and
// stops from its TestMain. The zero value is ready. Safe for concurrent
// use.
type Shared[T any] struct {
	mu      sync.Mutex
	started bool
	v       T
	err     error
}

// Get returns the server, calling start on the first Get since the last
// Stop; a failed start is remembered and returned again, not retried.
func (s *Shared[T]) Get(start func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.v, s.err = start()
	}
	return s.v, s.err
}

// Stop calls stop on the server if Get started one, and forgets it.
func (s *Shared[T]) Stop(stop func(T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started && s.err == nil {
		stop(s.v)
	}
	var zero T
	s.started, s.v, s.err = false, zero, nil
}

// Main is a TestMain: it runs m, calls each stop (the servers' Stop
// functions), then, if the tests passed, fails the run when a goroutine
// leaked (goleak.Find). It exits the process.
func Main(m *testing.M, stops ...func()) {
	code := m.Run()
	for _, stop := range stops {
		stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}
