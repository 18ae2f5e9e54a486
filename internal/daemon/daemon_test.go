package daemon_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/internal/daemon"
)

// leakEnv makes the test binary leak a goroutine before Main (see
// TestMainLeak).
const leakEnv = "DAEMON_TEST_LEAK"

func TestMain(m *testing.M) {
	if os.Getenv(leakEnv) == "1" {
		block := make(chan struct{})
		go func() { <-block }()
		daemon.Main(m, func() { fmt.Println("server stopped") })
	}
	daemon.Main(m)
}

// TestMainLeak: Main stops the servers after the tests and fails a run
// that passed but leaked a goroutine.
func TestMainLeak(t *testing.T) {
	if os.Getenv(leakEnv) == "1" {
		return // the child: pass, and leak
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainLeak$")
	cmd.Env = append(os.Environ(), leakEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("leaking run: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "server stopped") || !strings.Contains(string(out), "goleak:") {
		t.Fatalf("leaking run did not stop the server and report the leak:\n%s", out)
	}
}

func TestFreePort(t *testing.T) {
	port, err := daemon.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d is not free: %v", port, err)
	}
	l.Close()
}

func TestStop(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	// A process that exits on SIGTERM stops at once, long before grace.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	daemon.Stop(cmd, 20*time.Second)
	if d := time.Since(began); d > 10*time.Second || cmd.ProcessState == nil {
		t.Fatalf("stopped after %v, state %v", d, cmd.ProcessState)
	}
	// One that ignores SIGTERM (inherited by exec) is killed after grace.
	cmd = exec.Command("sh", "-c", `trap "" TERM; exec sleep 30`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let sh set the trap
	began = time.Now()
	daemon.Stop(cmd, 200*time.Millisecond)
	if d := time.Since(began); d < 200*time.Millisecond || cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Fatalf("stopped after %v, state %v; want killed after the grace", d, cmd.ProcessState)
	}
	daemon.Stop(exec.Command("sleep", "1"), time.Second) // never started: nothing to do
}

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "FALSE": false, "1": true, "true": true, "yes": true} {
		t.Setenv("CI", v)
		if got := daemon.InCI(); got != want {
			t.Errorf("CI=%q: %v", v, got)
		}
	}
}

// tb records what Require asked of a test instead of ending it.
type tb struct {
	testing.TB
	skipped, failed string
}

func (*tb) Helper()                        {}
func (t *tb) Skipf(f string, args ...any)  { t.skipped = fmt.Sprintf(f, args...) }
func (t *tb) Fatalf(f string, args ...any) { t.failed = fmt.Sprintf(f, args...) }
func (t *tb) ended() bool                  { return t.skipped != "" || t.failed != "" }
func (t *tb) String() string               { return "skip " + t.skipped + "; fail " + t.failed }

func TestRequire(t *testing.T) {
	errMissing := errors.New("not installed")
	t.Setenv("CI", "")
	var r tb
	daemon.Require(&r, "Redis", "a redis-server", nil, errMissing)
	if r.ended() {
		t.Fatalf("nil error ended the test: %s", r.String())
	}
	r = tb{}
	daemon.Require(&r, "Redis", "a redis-server", fmt.Errorf("start: %w", errMissing), errMissing)
	if r.skipped != "skipping Redis test: start: not installed" {
		t.Fatalf("missing server outside CI: %s", r.String())
	}
	r = tb{}
	daemon.Require(&r, "Redis", "a redis-server", errors.New("port taken"), errMissing)
	if r.skipped != "" || r.failed != "Redis test needs a redis-server: port taken" {
		t.Fatalf("broken server: %s", r.String())
	}
	t.Setenv("CI", "1")
	r = tb{}
	daemon.Require(&r, "MariaDB", "a server", errMissing, errMissing)
	if r.skipped != "" || r.failed != "MariaDB test needs a server: not installed" {
		t.Fatalf("missing server in CI: %s", r.String())
	}
}

func TestShared(t *testing.T) {
	var s daemon.Shared[int]
	starts, stops := 0, 0
	start := func() (int, error) { starts++; return 40 + starts, nil }
	stop := func(int) { stops++ }
	for range 3 {
		if v, err := s.Get(start); v != 41 || err != nil {
			t.Fatalf("Get = %d, %v", v, err)
		}
	}
	s.Stop(stop)
	s.Stop(stop)
	if starts != 1 || stops != 1 {
		t.Fatalf("%d starts, %d stops; want 1, 1", starts, stops)
	}
	if v, _ := s.Get(start); v != 42 {
		t.Fatalf("after Stop, Get = %d; want a new start", v)
	}
	// A failed start is remembered, not retried, and not stopped.
	var f daemon.Shared[int]
	boom := errors.New("boom")
	fails := 0
	for range 2 {
		if _, err := f.Get(func() (int, error) { fails++; return 0, boom }); err != boom {
			t.Fatal(err)
		}
	}
	f.Stop(stop)
	if fails != 1 || stops != 1 {
		t.Fatalf("%d starts, %d stops after a failed start", fails, stops)
	}
}

// One server per test binary: the first Get starts it, later ones share
// it, Stop (from TestMain) stops it.
func ExampleShared() {
	var redis daemon.Shared[string]
	start := func() (string, error) {
		fmt.Println("starting")
		return "127.0.0.1:6380", nil
	}
	a, _ := redis.Get(start)
	b, _ := redis.Get(start)
	fmt.Println(a, b)
	redis.Stop(func(addr string) { fmt.Println("stopping", addr) })
	// Output:
	// starting
	// 127.0.0.1:6380 127.0.0.1:6380
	// stopping 127.0.0.1:6380
}
