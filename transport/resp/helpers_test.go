package resp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/transport/resp"
	"github.com/readretry/readretry/transport/resp/resptest"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

var quiet = slog.New(slog.DiscardHandler)

// testData is the data set of every test's replicas: small enough to load
// in milliseconds, lists long enough for several LRANGE chunks.
var testData = resptest.Data{Keys: 500, Lists: 40}

// sharedReplicas are three replicas that no test injects a fault into,
// started on first use and stopped by TestMain.
type sharedReplicas struct {
	mu  sync.Mutex
	r   *resptest.Replicas
	err error
	did bool
}

var shared sharedReplicas

func (s *sharedReplicas) get(t testing.TB) *resptest.Replicas {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.did {
		s.did = true
		s.r, s.err = resptest.StartReplicas(3, testData)
	}
	requireServer(t, s.err)
	return s.r
}

func (s *sharedReplicas) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r != nil {
		s.r.Stop()
	}
}

// requireServer skips without redis-server (fails in CI, which installs it).
func requireServer(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, resptest.ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skipf("skipping: %v", err)
	}
	t.Fatal(err)
}

// ownReplicas starts n replicas for one test, which may injure them.
func ownReplicas(t testing.TB, n int) *resptest.Replicas {
	t.Helper()
	r, err := resptest.StartReplicas(n, testData)
	requireServer(t, err)
	t.Cleanup(r.Stop)
	return r
}

var zone = retry.Zone{AppID: 1, ZoneID: 1}

// route is the zone's conf:// element: the three mapped reads, the
// default listed code, two retries.
const route = "conf://ReadRetryCmd=7|23|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2"

// proxyFor names replica i as the engine sees it: one host per replica.
func proxyFor(i int) retry.Proxy { return retry.Proxy{Host: "replica-" + strconv.Itoa(i), Port: 6379} }

// setup makes a transport and a client over r's servers, with budgets
// simple and complex (the engine's read retry budgets).
func setup(t testing.TB, r *resptest.Replicas, cfg resp.Config, simple, complex time.Duration) (*retry.Client, *resp.Transport) {
	t.Helper()
	return setupAddrs(t, r.Addrs(), cfg, simple, complex)
}

// setupAddrs is setup over replica addresses (a fault proxy's in place of
// a server's, say).
func setupAddrs(t testing.TB, addrs []string, cfg resp.Config, simple, complex time.Duration) (*retry.Client, *resp.Transport) {
	t.Helper()
	cfg.Resolve = func(p retry.Proxy) (string, error) {
		for i := range addrs {
			if proxyFor(i) == p {
				return addrs[i], nil
			}
		}
		return "", fmt.Errorf("no replica %v", p)
	}
	if cfg.Backoff == nil {
		cfg.Backoff = backoff.Constant{Wait: 5 * time.Millisecond}
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 200 * time.Millisecond
	}
	cfg.Logger = quiet
	tr, err := resp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, NoRetryBudget: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = tr.Close()
	})
	proxies := make([]retry.Proxy, len(addrs))
	for i := range addrs {
		proxies[i] = proxyFor(i)
	}
	if err := c.ApplyRoute(zone, proxies, route); err != nil {
		t.Fatal(err)
	}
	// ApplyRoute does not wait on dials: let the first ones finish (a
	// replica down at start is dialled again later).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.WaitDialed(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadRetryTimeout(simple, complex); err != nil {
		t.Fatal(err)
	}
	return c, tr
}

// getReq, batchReq and rangeReq build the three mapped reads.
func getReq(d resptest.Data, i int) *retry.Request {
	return &retry.Request{Command: wire.CmdGet, Key: []byte(d.Key(i)), AsyncID: uint64(i)}
}

func batchReq(d resptest.Data, idx []int) *retry.Request {
	keys := make([][]byte, len(idx))
	for n, i := range idx {
		keys[n] = []byte(d.Key(i))
	}
	return &retry.Request{Command: wire.CmdBatchGet, Keys: keys}
}

func rangeReq(d resptest.Data, j int, pos uint64, limit uint32) *retry.Request {
	return &retry.Request{Command: wire.CmdListGetAll, Key: []byte(d.List(j)), Position: pos, Limit: limit}
}

// checkGet checks a GET of key i against the data set: its value, or
// ResultNotFound beyond the data set's keys.
func checkGet(d resptest.Data, i int, res *retry.Result) error {
	if i >= d.Keys {
		if res.Code() != resp.ResultNotFound || res.Len() != 0 {
			return fmt.Errorf("missing key %d: code %d, %d records; want %d, 0", i, res.Code(), res.Len(), resp.ResultNotFound)
		}
		return nil
	}
	if res.Code() != retry.ResultOK || res.Len() != 1 {
		return fmt.Errorf("key %d: code %d, %d records; want 0, 1", i, res.Code(), res.Len())
	}
	if rec := res.Record(0); string(rec.Value) != d.Value(i) || string(rec.Key) != d.Key(i) {
		return fmt.Errorf("key %d: got %q=%q, want %q=%q", i, rec.Key, rec.Value, d.Key(i), d.Value(i))
	}
	return nil
}

// checkBatch checks a batch read of keys idx: every index answered exactly
// once, with the key's value or ResultNotFound.
func checkBatch(d resptest.Data, idx []int, res *retry.Result) error {
	if res.Code() != retry.ResultOK {
		return fmt.Errorf("batch: code %d", res.Code())
	}
	seen := make([]bool, len(idx))
	for n := range res.Len() {
		rec := res.Record(n)
		if rec.Tag >= uint64(len(idx)) {
			return fmt.Errorf("batch: record tag %d beyond %d keys", rec.Tag, len(idx))
		}
		if seen[rec.Tag] {
			return fmt.Errorf("batch: key index %d answered twice", rec.Tag)
		}
		seen[rec.Tag] = true
		i := idx[rec.Tag]
		if string(rec.Key) != d.Key(i) {
			return fmt.Errorf("batch: index %d carries key %q, want %q", rec.Tag, rec.Key, d.Key(i))
		}
		if i >= d.Keys {
			if rec.Result != resp.ResultNotFound || len(rec.Value) != 0 {
				return fmt.Errorf("batch: missing key %d: result %d value %q", i, rec.Result, rec.Value)
			}
		} else if rec.Result != 0 || string(rec.Value) != d.Value(i) {
			return fmt.Errorf("batch: key %d: result %d value %q, want %q", i, rec.Result, rec.Value, d.Value(i))
		}
	}
	for n, ok := range seen {
		if !ok {
			return fmt.Errorf("batch: key index %d (key %d) not answered", n, idx[n])
		}
	}
	return nil
}

// checkRange checks an index read of list j from pos (limit 0 = all):
// every element from pos on, each once, positions in order.
func checkRange(d resptest.Data, j int, pos uint64, limit uint32, res *retry.Result) error {
	if res.Code() != retry.ResultOK {
		return fmt.Errorf("list %d: code %d", j, res.Code())
	}
	end := uint64(d.ListLen(j))
	if limit != 0 {
		end = min(end, pos+uint64(limit))
	}
	want := 0
	if end > pos {
		want = int(end - pos)
	}
	if res.Len() != want {
		return fmt.Errorf("list %d from %d: %d records, want %d", j, pos, res.Len(), want)
	}
	for n := range res.Len() {
		rec := res.Record(n)
		p := pos + uint64(n)
		if rec.Tag != p || rec.Result != 0 || string(rec.Value) != d.Elem(j, int(p)) {
			return fmt.Errorf("list %d record %d: tag %d result %d value %q, want tag %d value %q",
				j, n, rec.Tag, rec.Result, rec.Value, p, d.Elem(j, int(p)))
		}
	}
	return nil
}

// do runs one request with a bound on the wait.
func do(c *retry.Client, req *retry.Request, res *retry.Result, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Do(ctx, zone, req, res)
}

// isCode reports whether err is Do's error for result code code.
func isCode(err error, code int32) bool {
	var e *retry.Error
	return errors.As(err, &e) && e.Code == code
}
