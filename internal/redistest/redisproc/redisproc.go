// Package redisproc starts, signals, kills, restarts and stops
// redis-server child processes on 127.0.0.1: the one starter behind
// internal/redistest (idem's Redis tests) and transport/resp/resptest (the
// Redis transport's tests and the simulator's Redis backend). It imports
// no testing package, so the simulator's binary (cmd/rrsim, through
// resptest) can use it.
//
// Every server runs with persistence off (no RDB schedule, no AOF), in
// the foreground, logging warnings to a file in a temporary directory of
// its own; Stop removes the directory. A snapshot written with SAVE stays
// in that directory, so Restart after Kill loads it, as a restarted
// replica does.
package redisproc

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
	"time"
)

// ErrNotInstalled is returned by Start when redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server not found on PATH (Debian: apt-get install redis-server)")

// StartTimeout bounds how long Start and Restart wait for the server to
// answer PING.
const StartTimeout = 10 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// Server is one redis-server child process on 127.0.0.1. Its methods are
// safe for concurrent use.
type Server struct {
	// Addr is the server's host:port.
	Addr string
	// Dir is the server's working directory (its log, its snapshot).
	Dir  string
	path string
	args []string // the whole command line, for Restart

	mu      sync.Mutex
	cmd     *exec.Cmd // nil while not running
	log     *os.File
	stopped bool // SIGSTOP sent and not yet continued
}

// Start starts a redis-server on a free loopback port with the common
// arguments and then extra(dir)'s (nil: none), and waits until it answers
// PING. A port taken between choosing and binding is retried with another
// one, three times in all. Errors: ErrNotInstalled; extra's error; the
// start's, with the server's log.
func Start(extra func(dir string) ([]string, error)) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	var last error
	for range 3 {
		s, err := start(path, extra)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func start(path string, extra func(dir string) ([]string, error)) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, err
	}
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	}
	if extra != nil {
		more, err := extra(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		args = append(args, more...)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, path: path, args: args}
	if err := s.Restart(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Restart runs the server's process again, on the same port, directory
// and arguments, and waits until it answers PING; it loads the snapshot
// the last SAVE wrote, if any (answering -LOADING meanwhile). Call it
// after Kill; on a running server it fails (the port is taken).
func (s *Server) Restart() error {
	log, err := os.OpenFile(filepath.Join(s.Dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.path, s.args...)
	// Files, not writers: os/exec then starts no copying goroutines.
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	s.mu.Lock()
	s.cmd, s.log, s.stopped = cmd, log, false
	s.mu.Unlock()
	deadline := time.Now().Add(StartTimeout)
	for {
		err := Ping(s.Addr)
		if err == nil {
			return nil
		}
		// Signal 0 checks that the process is still alive: a server that
		// exited (port taken) will never answer.
		if time.Now().After(deadline) || cmd.Process.Signal(syscall.Signal(0)) != nil {
			s.terminate(syscall.SIGKILL)
			out, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redis-server on %s: %w; log: %s", s.Addr, err, strings.TrimSpace(string(out)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// terminate signals the process, continues it if it was stopped, waits
// for it (killing it after stopGrace) and closes its log.
func (s *Server) terminate(sig syscall.Signal) {
	s.mu.Lock()
	cmd, log, stopped := s.cmd, s.log, s.stopped
	s.cmd, s.log, s.stopped = nil, nil, false
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
		<-done
	}
	log.Close()
}

// Stop terminates the server (SIGTERM, SIGKILL after 5 s) and removes its
// directory. Safe to call more than once.
func (s *Server) Stop() {
	s.terminate(syscall.SIGTERM)
	os.RemoveAll(s.Dir)
}

// Kill kills the server with SIGKILL and waits for it: connections reset,
// new ones are refused until Restart. Its directory stays.
func (s *Server) Kill() { s.terminate(syscall.SIGKILL) }

// Signal sends sig to the running process; SIGSTOP is remembered, so that
// Stop and Kill continue a stopped process. It fails when the server is
// not running.
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redisproc: server not running")
	}
	s.stopped = sig == syscall.SIGSTOP
	return s.cmd.Process.Signal(sig)
}

// Ping sends PING to addr on a new connection and checks for +PONG,
// within a second each for the dial and the exchange.
func Ping(addr string) error {
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

// FreePort returns a loopback port nothing listens on at the moment. A
// server may still lose it to another process before it binds; Start
// retries with another port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}
