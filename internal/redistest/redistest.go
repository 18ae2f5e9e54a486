// Package redistest runs a real redis-server for the tests and benchmarks
// of idem's Redis store — and a real three-master Redis Cluster — on
// 127.0.0.1 at free ports, with persistence off and their files in
// temporary directories, stopped by the test binary's TestMain. Nothing is
// mocked.
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
	"syscall"
	"testing"
	"time"

	"github.com/readretry/readretry/internal/daemon"
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
		s, err := start(path, nil)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

// start starts one redis-server; extra(port) gives arguments beyond the
// common ones.
func start(path string, extra func(dir string) ([]string, error)) (*Server, error) {
	port, err := daemon.FreePort()
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
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--loglevel", "warning",
		// DEBUG SLEEP stalls the server in tests that lose a reply.
		"--enable-debug-command", "local",
	}
	if extra != nil {
		more, err := extra(dir)
		if err != nil {
			log.Close()
			os.RemoveAll(dir)
			return nil, err
		}
		args = append(args, more...)
	}
	cmd := exec.Command(path, args...)
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
	daemon.Stop(s.cmd, 5*time.Second)
	s.log.Close()
	os.RemoveAll(s.dir)
}

// The test binary's server and cluster, started on first use.
var (
	shared        daemon.Shared[*Server]
	sharedCluster daemon.Shared[*Cluster]
)

// Addr returns the address of the test binary's shared server, starting it
// on first use. Without redis-server it skips tb — or fails it in CI (see
// the package comment). Call Stop from TestMain.
func Addr(tb testing.TB) string {
	tb.Helper()
	s, err := shared.Get(Start)
	daemon.Require(tb, "Redis", "a redis-server", err, ErrNotInstalled)
	return s.Addr
}

// Stop stops the shared server if Addr started one, and the shared cluster
// if ClusterAddrs started one.
func Stop() {
	shared.Stop((*Server).Stop)
	sharedCluster.Stop((*Cluster).Stop)
}

// Cluster is a Redis Cluster of three masters (no replicas), each a
// redis-server child process, the 16,384 slots split evenly.
type Cluster struct {
	// Nodes are the masters.
	Nodes []*Server
}

// Addrs returns the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Stop stops every node and removes their directories.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// clusterMasters is the number of masters StartCluster starts.
const clusterMasters = 3

// StartCluster starts three cluster-enabled redis-servers on free
// loopback ports (each with its cluster bus on another free port), joins
// them with `redis-cli --cluster create … --cluster-replicas 0
// --cluster-yes`, and waits until every node reports cluster_state:ok.
func StartCluster() (*Cluster, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, ErrNotInstalled
	}
	c := &Cluster{}
	for range clusterMasters {
		s, err := start(path, func(dir string) ([]string, error) {
			bus, err := daemon.FreePort()
			if err != nil {
				return nil, err
			}
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000",
				"--cluster-port", strconv.Itoa(bus),
			}, nil
		})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w: %s", err, out)
	}
	deadline := time.Now().Add(startTimeout)
	for _, n := range c.Nodes {
		for {
			host, port, _ := net.SplitHostPort(n.Addr)
			out, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Stop()
				return nil, fmt.Errorf("redistest: cluster node %s not ok after %v: %s %v", n.Addr, startTimeout, out, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, nil
}

// ClusterAddrs returns the node addresses of the test binary's shared
// cluster, starting it on first use; without redis-server it skips tb, or
// fails it in CI. Call Stop from TestMain.
func ClusterAddrs(tb testing.TB) []string {
	tb.Helper()
	c, err := sharedCluster.Get(StartCluster)
	daemon.Require(tb, "Redis Cluster", "redis-server and redis-cli", err, ErrNotInstalled)
	return c.Addrs()
}
