// Package resptest starts real redis-server processes on 127.0.0.1 for the
// tests of transport/resp and for the simulator's Redis backend, loads them
// with one deterministic data set (Data), and injects the faults a real
// replica has, using the server's own means: SIGSTOP/SIGCONT (a dark or
// flapping host), DEBUG SLEEP (a slow replica), CLIENT PAUSE (a stall),
// SIGKILL (refused connections), a script that keeps the server BUSY,
// DEBUG RELOAD slowed by key-load-delay (LOADING), and REPLICAOF a dead
// master with replica-serve-stale-data off (MASTERDOWN). Nothing is mocked.
//
// # Topology: independent servers with the same data
//
// The replicas are independent servers, each loaded with the same data,
// not one master and its replicas: a fault injected into one server must
// stay on that server (with replication, stopping or killing the master
// would turn every replica MASTERDOWN at once — a different scenario, all
// replicas down), and every server holds the whole data set from the
// start, without waiting for a sync. The one fault replication causes on a
// replica, MASTERDOWN, is made on a single server by pointing it at a
// master that does not exist (Server.MasterDown), which is exactly the
// state of a replica whose master died.
//
// Servers run with persistence off and the DEBUG command enabled, their
// files in temporary directories; Stop removes them. When redis-server is
// not installed, Start returns ErrNotInstalled.
package resptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/readretry/readretry/internal/redistest/redisproc"
)

// ErrNotInstalled is returned by Start when redis-server is not on PATH.
var ErrNotInstalled = errors.New("resptest: redis-server not found on PATH (Debian: apt-get install redis-server)")

// startTimeout bounds how long a fault waits for a server to come back.
const startTimeout = redisproc.StartTimeout

// Server is one redis-server child process on 127.0.0.1, started by
// redisproc (the starter internal/redistest uses too); its embedded
// redisproc.Server gives Addr, Stop (terminate, remove its directory),
// Kill (SIGKILL: connections reset, new ones refused until Restart) and
// Restart (again on the same port, loading the snapshot Load saved and
// answering -LOADING while it does, as a restarted replica would; without
// a snapshot it starts empty).
type Server struct {
	*redisproc.Server

	mu   sync.Mutex
	busy <-chan error
}

// Start starts a redis-server on a free loopback port and waits until it
// answers PING. A port taken between choosing and binding is retried.
func Start() (*Server, error) {
	s, err := redisproc.Start(func(string) ([]string, error) {
		return []string{"--enable-debug-command", "yes", "--busy-reply-threshold", "20"}, nil
	})
	switch {
	case errors.Is(err, redisproc.ErrNotInstalled):
		return nil, ErrNotInstalled
	case err != nil:
		return nil, fmt.Errorf("resptest: %w", err)
	}
	return &Server{Server: s}, nil
}

// Freeze stops the process with SIGSTOP: connections stay open and nothing
// answers — a dark host. Thaw continues it.
func (s *Server) Freeze() error { return s.Signal(syscall.SIGSTOP) }

// Thaw continues a frozen process with SIGCONT; it answers what was
// queued meanwhile.
func (s *Server) Thaw() error { return s.Signal(syscall.SIGCONT) }

// Sleep makes the server sleep d inside one command (DEBUG SLEEP), so
// every client waits: a slow replica. It returns at once; the returned
// channel yields the command's outcome when the sleep ends.
func (s *Server) Sleep(d time.Duration) <-chan error {
	secs := strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
	return s.async("DEBUG", "SLEEP", secs)
}

// Pause stalls every client's commands for d (CLIENT PAUSE d ALL): the
// server accepts connections and bytes but answers nothing until d ends.
func (s *Server) Pause(d time.Duration) error {
	_, err := s.Do("CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL")
	return err
}

// StartBusy runs a script that never ends; once busy-reply-threshold
// (20 ms) has passed the server answers every other command with -BUSY.
// EndBusy kills the script.
func (s *Server) StartBusy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == nil {
		s.busy = s.async("EVAL", "while true do end", "0")
	}
}

// EndBusy ends the script StartBusy started (SCRIPT KILL), waits for it
// to return, and reports an error if the server did not come back.
func (s *Server) EndBusy() error {
	s.mu.Lock()
	ch := s.busy
	s.busy = nil
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	deadline := time.Now().Add(startTimeout)
	for {
		r, err := s.Do("SCRIPT", "KILL")
		if err == nil && r == "OK" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("resptest: SCRIPT KILL: %q %v", r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-ch // the script's own connection gets its error reply
	return nil
}

// Reload makes the server reload its data set (DEBUG RELOAD) with each key
// taking perKey to load; while it loads, other clients get -LOADING. It
// returns at once; the channel yields DEBUG RELOAD's outcome.
func (s *Server) Reload(perKey time.Duration) (<-chan error, error) {
	if _, err := s.Do("CONFIG", "SET", "loading-process-events-interval-bytes", "1024"); err != nil {
		return nil, err
	}
	if _, err := s.Do("CONFIG", "SET", "key-load-delay", strconv.FormatInt(perKey.Microseconds(), 10)); err != nil {
		return nil, err
	}
	return s.async("DEBUG", "RELOAD"), nil
}

// MasterDown makes the server a replica of a master that does not exist,
// with replica-serve-stale-data off: it keeps its data and answers reads
// with -MASTERDOWN, as a replica whose master died does. MasterUp undoes
// it.
func (s *Server) MasterDown() error {
	if _, err := s.Do("CONFIG", "SET", "replica-serve-stale-data", "no"); err != nil {
		return err
	}
	port, err := redisproc.FreePort() // nothing listens there: the link stays down
	if err != nil {
		return err
	}
	_, err = s.Do("REPLICAOF", "127.0.0.1", strconv.Itoa(port))
	return err
}

// MasterUp makes the server a master again (REPLICAOF NO ONE).
func (s *Server) MasterUp() error {
	_, err := s.Do("REPLICAOF", "NO", "ONE")
	return err
}

// async sends one command on a connection of its own and returns at once;
// the channel (buffered) receives the outcome, so the goroutine ends
// whether or not anyone reads it.
func (s *Server) async(args ...string) <-chan error {
	ch := make(chan error, 1)
	nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		ch <- err
		return ch
	}
	if _, err := nc.Write(AppendCommand(nil, args...)); err != nil {
		nc.Close()
		ch <- err
		return ch
	}
	go func() {
		defer nc.Close()
		_ = nc.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := readReply(bufio.NewReader(nc))
		ch <- err
	}()
	return ch
}

// Do sends one command on a new connection and returns its reply as text
// (a status, bulk or integer; arrays are joined with spaces); an error
// reply is returned as an error. Bounded by a 5 s deadline.
func (s *Server) Do(args ...string) (string, error) {
	nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(AppendCommand(nil, args...)); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(nc))
}

// Load writes d into the server with pipelined SET and RPUSH commands,
// after FLUSHALL, and saves a snapshot (SAVE) for Restart.
func (s *Server) Load(d Data) error {
	if _, err := s.Do("FLUSHALL"); err != nil {
		return err
	}
	cmds, n := d.commands()
	if err := s.Pipe(cmds, n); err != nil {
		return err
	}
	_, err := s.Do("SAVE")
	return err
}

// Pipe writes n RESP commands (cmds, built with AppendCommand) on one
// connection without waiting between them, then reads the n replies, and
// returns the first error reply or connection error. Bounded by a
// one-minute deadline.
func (s *Server) Pipe(cmds []byte, n int) error {
	nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	errc := make(chan error, 1)
	go func() { _, err := nc.Write(cmds); errc <- err }()
	br := bufio.NewReader(nc)
	var first error
	for range n {
		if _, err := readReply(br); err != nil && first == nil {
			first = err
			if !isReplyError(err) {
				nc.Close() // unblocks the writer
				break
			}
		}
	}
	if err := <-errc; err != nil && first == nil {
		first = err
	}
	return first
}

// replyError is an error reply from the server.
type replyError string

func (e replyError) Error() string { return "resptest: server replied " + string(e) }

func isReplyError(err error) bool {
	var re replyError
	return errors.As(err, &re)
}

// readReply reads one RESP2 reply (test helper: it allocates freely).
func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("resptest: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", replyError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(br)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("resptest: unexpected reply %q", line)
}

// Replicas is a set of independent servers loaded with the same data.
type Replicas struct {
	Servers []*Server
	Data    Data
}

// StartReplicas starts n servers and loads d into each. On error every
// server started is stopped.
func StartReplicas(n int, d Data) (*Replicas, error) {
	r := &Replicas{Data: d}
	for range n {
		s, err := Start()
		if err != nil {
			r.Stop()
			return nil, err
		}
		r.Servers = append(r.Servers, s)
		if err := s.Load(d); err != nil {
			r.Stop()
			return nil, err
		}
	}
	return r, nil
}

// Addrs returns the servers' addresses in order.
func (r *Replicas) Addrs() []string {
	out := make([]string, len(r.Servers))
	for i, s := range r.Servers {
		out[i] = s.Addr
	}
	return out
}

// Stop stops every server.
func (r *Replicas) Stop() {
	for _, s := range r.Servers {
		s.Stop()
	}
}
