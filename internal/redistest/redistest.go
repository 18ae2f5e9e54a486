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
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/internal/daemon"
	"github.com/readretry/readretry/internal/redistest/redisproc"
)

// ErrNotInstalled is returned by Start when redis-server is not on PATH.
var ErrNotInstalled = errors.New("redistest: redis-server not found on PATH (Debian: apt-get install redis-server)")

// Server is one redis-server child process (redisproc.Server, the
// starter this package shares with transport/resp/resptest).
type Server struct {
	*redisproc.Server
}

// Start starts a redis-server on a free loopback port and waits until it
// answers PING. A port taken between choosing and binding is retried with
// another one.
func Start() (*Server, error) { return start(nil) }

// start starts one redis-server; extra(dir) gives arguments beyond the
// common ones.
func start(extra func(dir string) ([]string, error)) (*Server, error) {
	s, err := redisproc.Start(func(dir string) ([]string, error) {
		// DEBUG SLEEP stalls the server in tests that lose a reply.
		args := []string{"--enable-debug-command", "local"}
		if extra != nil {
			more, err := extra(dir)
			if err != nil {
				return nil, err
			}
			args = append(args, more...)
		}
		return args, nil
	})
	switch {
	case errors.Is(err, redisproc.ErrNotInstalled):
		return nil, ErrNotInstalled
	case err != nil:
		return nil, fmt.Errorf("redistest: %w", err)
	}
	return &Server{s}, nil
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
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, ErrNotInstalled
	}
	c := &Cluster{}
	for range clusterMasters {
		s, err := start(func(dir string) ([]string, error) {
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
	deadline := time.Now().Add(redisproc.StartTimeout)
	for _, n := range c.Nodes {
		for {
			host, port, _ := net.SplitHostPort(n.Addr)
			out, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Stop()
				return nil, fmt.Errorf("redistest: cluster node %s not ok after %v: %s %v", n.Addr, redisproc.StartTimeout, out, err)
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
