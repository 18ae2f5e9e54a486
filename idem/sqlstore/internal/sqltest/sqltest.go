// Package sqltest runs real database servers for the tests of idem's SQL
// store: a throwaway PostgreSQL (Debian's postgresql) and a throwaway
// MariaDB (Debian's mariadb-server), each on 127.0.0.1 at a free port, its
// data directory and socket in a temporary directory, durability off
// (fsync) since the data is thrown away, started once per test binary and
// stopped by its TestMain. Nothing is mocked.
//
// Both servers refuse to run as root. Run as root (as CI is), the helper
// gives the temporary directory to the servers' own system users
// ("postgres", "mysql") and starts the PostgreSQL tools through runuser;
// mariadbd drops to "mysql" itself (--user). Run as anyone else, the
// servers run as that user.
//
// When a server is not installed, tests skip with a message saying how to
// install it — except in CI (the CI environment variable is set), where
// they fail: .ci/run installs both packages, so a missing server there is
// a broken CI, not a reason to skip.
package sqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	"github.com/readretry/readretry/internal/daemon"
)

// ErrNotInstalled is wrapped by Start* when the server's binaries are
// missing.
var ErrNotInstalled = errors.New("sqltest: database server not installed")

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 60 * time.Second

// Server is one running database server.
type Server struct {
	// Driver is the database/sql driver name: "pgx" or "mysql".
	Driver string
	addr   string
	dir    string
	stop   func()
	n      int // databases handed out by Open
	mu     sync.Mutex
	admin  *sql.DB
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	if s.admin != nil {
		s.admin.Close()
	}
	s.stop()
	os.RemoveAll(s.dir)
}

// asUser returns the command that runs name with args as the system user
// sysUser when this process is root, and as this process's user otherwise.
func asUser(sysUser, name string, args ...string) *exec.Cmd {
	if os.Geteuid() != 0 {
		return exec.Command(name, args...)
	}
	return exec.Command("runuser", append([]string{"-u", sysUser, "--", name}, args...)...)
}

// tempDirFor makes a temporary directory that sysUser owns when this
// process is root.
func tempDirFor(sysUser, pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup(sysUser)
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("sqltest: system user %s: %w", sysUser, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// postgresBin returns the directory of the newest installed PostgreSQL's
// initdb and pg_ctl (Debian keeps them off PATH, under
// /usr/lib/postgresql/N/bin).
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w: no initdb/pg_ctl (Debian: apt-get install postgresql)", ErrNotInstalled)
}

// StartPostgres initialises a cluster in a temporary directory and starts
// it on a free loopback port, trusting local connections as "postgres".
func StartPostgres() (*Server, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := tempDirFor("postgres", "pgtest-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	out, err := asUser("postgres", filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sqltest: initdb: %w: %s", err, out)
	}
	var last error
	for range 3 {
		port, err := daemon.FreePort()
		if err != nil {
			return nil, err
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"+
			" -c full_page_writes=off -c max_connections=300", port, dir)
		out, err := asUser("postgres", filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"),
			"-w", "-t", strconv.Itoa(int(startTimeout/time.Second)), "-o", opts, "start").CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			last = fmt.Errorf("sqltest: pg_ctl start on port %d: %w: %s %s", port, err, out, log)
			continue
		}
		s := &Server{
			Driver: "pgx",
			addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			dir:    dir,
			stop: func() {
				_ = asUser("postgres", filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop").Run()
			},
		}
		if s.admin, err = s.waitReady(s.dsn("postgres")); err != nil {
			s.Stop()
			return nil, err
		}
		return s, nil
	}
	os.RemoveAll(dir)
	return nil, last
}

// mariadbBins returns the paths of mariadb-install-db and mariadbd.
func mariadbBins() (install, server string, err error) {
	install, err1 := exec.LookPath("mariadb-install-db")
	server = "/usr/sbin/mariadbd"
	if _, err := os.Stat(server); err != nil {
		server, err = exec.LookPath("mariadbd")
		if err != nil {
			err1 = err
		}
	}
	if err1 != nil {
		return "", "", fmt.Errorf("%w: no mariadb-install-db/mariadbd (Debian: apt-get install mariadb-server)", ErrNotInstalled)
	}
	return install, server, nil
}

// StartMariaDB initialises a MariaDB data directory in a temporary
// directory and starts mariadbd on a free loopback port, with a
// passwordless root.
func StartMariaDB() (*Server, error) {
	install, server, err := mariadbBins()
	if err != nil {
		return nil, err
	}
	dir, err := tempDirFor("mysql", "mariadbtest-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=mysql")
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sqltest: mariadb-install-db: %w: %s", err, out)
	}
	var last error
	for range 3 {
		port, err := daemon.FreePort()
		if err != nil {
			return nil, err
		}
		log, err := os.Create(filepath.Join(dir, "stdout.log"))
		if err != nil {
			return nil, err
		}
		args := []string{"--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(dir, "sock"),
			"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--skip-name-resolve", "--skip-log-bin",
			"--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0", "--max-connections=300",
			"--pid-file=" + filepath.Join(dir, "pid"), "--log-error=" + filepath.Join(dir, "error.log")}
		if os.Geteuid() == 0 {
			args = append(args, "--user=mysql")
		}
		cmd := exec.Command(server, args...)
		// Files, not writers: os/exec then starts no copying goroutines.
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			log.Close()
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{
			Driver: "mysql",
			addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			dir:    dir,
			stop: func() {
				daemon.Stop(cmd, 20*time.Second)
				log.Close()
			},
		}
		if s.admin, err = s.waitReady(s.dsn("")); err != nil {
			s.stop()
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			last = fmt.Errorf("%w; log: %s", err, strings.TrimSpace(string(errLog)))
			continue
		}
		return s, nil
	}
	os.RemoveAll(dir)
	return nil, last
}

// dsn is the data source name of database db on s.
func (s *Server) dsn(db string) string {
	if s.Driver == "pgx" {
		return "postgres://postgres@" + s.addr + "/" + db + "?sslmode=disable"
	}
	return "root@tcp(" + s.addr + ")/" + db
}

// waitReady opens dsn and pings it until the server answers.
func (s *Server) waitReady(dsn string) (*sql.DB, error) {
	db, err := sql.Open(s.Driver, dsn)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return db, nil
		}
		if time.Now().After(deadline) {
			db.Close()
			return nil, fmt.Errorf("sqltest: %s on %s not ready after %v: %w", s.Driver, s.addr, startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Open returns a connection pool on a new, empty database of s (a schema
// on PostgreSQL), closed when tb ends, so that every test has its own
// tables. At most maxConns connections are open at once.
func (s *Server) Open(tb testing.TB, maxConns int) *sql.DB {
	tb.Helper()
	return s.OpenVia(tb, maxConns, s.addr)
}

// Addr returns the server's host:port on 127.0.0.1.
func (s *Server) Addr() string { return s.addr }

// OpenVia is Open, connecting to addr — a Proxy in front of Addr — instead
// of the server itself.
func (s *Server) OpenVia(tb testing.TB, maxConns int, addr string) *sql.DB {
	tb.Helper()
	s.mu.Lock()
	s.n++
	name := "t" + strconv.Itoa(s.n)
	s.mu.Unlock()
	var dsn string
	if s.Driver == "pgx" {
		if _, err := s.admin.Exec("CREATE SCHEMA " + name); err != nil {
			tb.Fatal(err)
		}
		dsn = s.dsn("postgres") + "&search_path=" + name
	} else {
		if _, err := s.admin.Exec("CREATE DATABASE " + name); err != nil {
			tb.Fatal(err)
		}
		dsn = s.dsn(name)
	}
	if addr != s.addr {
		dsn = strings.Replace(dsn, s.addr, addr, 1)
	}
	db, err := sql.Open(s.Driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	tb.Cleanup(func() { db.Close() })
	return db
}

// The servers of the test binary, started on first use.
var sharedPostgres, sharedMariaDB daemon.Shared[*Server]

// Postgres returns the test binary's PostgreSQL server, starting it on
// first use; without the binaries it skips tb, or fails it in CI. Call
// StopAll from TestMain.
func Postgres(tb testing.TB) *Server {
	tb.Helper()
	s, err := sharedPostgres.Get(StartPostgres)
	daemon.Require(tb, "PostgreSQL", "a server", err, ErrNotInstalled)
	return s
}

// MariaDB is Postgres for MariaDB.
func MariaDB(tb testing.TB) *Server {
	tb.Helper()
	s, err := sharedMariaDB.Get(StartMariaDB)
	daemon.Require(tb, "MariaDB", "a server", err, ErrNotInstalled)
	return s
}

// StopAll stops every server started through Postgres or MariaDB.
func StopAll() {
	sharedPostgres.Stop((*Server).Stop)
	sharedMariaDB.Stop((*Server).Stop)
}

// Proxy forwards TCP connections on 127.0.0.1 to a server and can drop
// the server's replies, to make a client's reply get lost after the
// server acted on its request. Close it (tb.Cleanup does) to end its
// goroutines.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	wg     sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn
	stalled        atomic.Bool
}

// StartProxy starts a proxy to target (host:port) and closes it when tb
// ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stall drops, from now on, every byte the server sends on the
// connections open now; connections opened later pass unharmed.
func (p *Proxy) Stall() {
	p.mu.Lock()
	for c := range p.conns {
		c.stalled.Store(true)
	}
	p.mu.Unlock()
}

// Close stops the proxy, closes its connections and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(server, client)
			server.Close()
		}()
		go func() {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && !c.stalled.Load() {
					if _, werr := client.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			client.Close()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}
