package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/transport/resp"
	"github.com/readretry/readretry/wire"
	"github.com/redis/go-redis/v9"
)

// redisKinds are the clients of -backend redis: readretry over
// transport/resp, and go-redis as Go developers read replicas today.
var redisKinds = []kind{
	{"readretry", "the engine over transport/resp, polled as rrsim polls it", newEngineClient},
	{"readretry-do", "the same engine through Client.Do, a goroutine per request", newDoClient},
	{"goredis-rr", "go-redis, one client per replica, round robin, no hedging; a context timeout of the budget", newGoRedisRR},
	{"goredis-failsafe", "go-redis per replica with failsafe-go's hedgepolicy (delay x, n hedges, each to another replica) inside a timeout of the budget", newGoRedisFailsafe},
}

// goRedis holds one go-redis client per replica, with go-redis's defaults
// but for the dial timeout (the engine's transport dials with 500 ms too).
type goRedis struct {
	clients []*redis.Client
	labels  []retry.Proxy
	rr      atomic.Uint64
}

func newGoRedis(e *env) *goRedis {
	g := &goRedis{labels: e.labels}
	for _, l := range e.labels {
		addr, _ := e.fleet.Resolve(l) // the stream-cut scenario resolves to its cutting proxy
		g.clients = append(g.clients, redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 500 * time.Millisecond}))
	}
	return g
}

func (g *goRedis) close() {
	for _, c := range g.clients {
		_ = c.Close()
	}
}

// pick returns the next replica round robin, skipping those tried (the
// least recently tried when all were).
func (g *goRedis) pick(tried []int) int {
	n := len(g.clients)
	base := int(g.rr.Add(1) % uint64(n))
	for k := 0; k < n; k++ {
		i := (base + k) % n
		used := false
		for _, t := range tried {
			used = used || t == i
		}
		if !used {
			return i
		}
	}
	return tried[0]
}

// transient reports whether err is one of the replica states transport/resp
// maps to the listed code.
func transient(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	word, _, _ := strings.Cut(re.Error(), " ")
	switch word {
	case "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN":
		return true
	}
	return false
}

// readOnce runs the request's Redis command on replica i and fills ans's
// records as transport/resp would (so the same checker reads both):
// GET → one record or ResultNotFound; MGET → a record per key, index as
// tag; LRANGE → records tagged by position, keyed by the list.
func (g *goRedis) readOnce(ctx context.Context, i int, r *request, ans *sim.Answer) error {
	req, err := wire.ParseRequest(r.frame)
	if err != nil {
		return err
	}
	c := g.clients[i]
	ans.Records, ans.Result = ans.Records[:0], retry.ResultOK
	switch req.Command() {
	case wire.CmdGet:
		key := string(req.Key())
		v, err := c.Get(ctx, key).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			ans.Result = resp.ResultNotFound
		case err != nil:
			return err
		default:
			ans.Records = append(ans.Records, wire.Record{Key: []byte(key), Value: v})
		}
	case wire.CmdBatchGet:
		var keys []string
		for it := req.Keys(); ; {
			_, k, ok := it.Next()
			if !ok {
				break
			}
			keys = append(keys, string(k))
		}
		vals, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			return err
		}
		for j, v := range vals {
			rec := wire.Record{Tag: uint64(j), Key: []byte(keys[j])}
			if s, ok := v.(string); ok {
				rec.Value = []byte(s)
			} else {
				rec.Result = resp.ResultNotFound
			}
			ans.Records = append(ans.Records, rec)
		}
	case wire.CmdListGetAll:
		key := string(req.Key())
		start, stop := int64(req.Position()), int64(-1)
		if l := req.Limit(); l != 0 {
			stop = start + int64(l) - 1
		}
		vals, err := c.LRange(ctx, key, start, stop).Result()
		if err != nil {
			return err
		}
		for j, v := range vals {
			ans.Records = append(ans.Records, wire.Record{Tag: uint64(start) + uint64(j), Key: []byte(key), Value: []byte(v)})
		}
	default:
		return errUnsupported
	}
	ans.RecordCount = len(ans.Records)
	return nil
}

var errUnsupported = errors.New("rrcompare: command without a redis mapping")

// finish sets ans's result for a request that ended with err.
func finishRedis(ans *sim.Answer, err error) {
	ans.Records, ans.RecordCount = ans.Records[:0], 0
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, timeout.ErrExceeded):
		ans.Result = retry.ResultReadRetryTimeout
	case transient(err):
		ans.Result = retry.ResultProxySwiftTimeout
	default:
		var re redis.Error
		if errors.As(err, &re) {
			ans.Result = resp.ResultReplicaError
		} else {
			ans.Result = retry.ResultNoProxy // the connection failed: refused, reset
		}
	}
}

// goRedisRR is what a Go service does without hedging: the next replica's
// client, one attempt (go-redis retries network errors on that replica
// itself), bounded by a context timeout of the read's budget.
type goRedisRR struct {
	*goRedis
	opt sim.Options
}

func newGoRedisRR(e *env) (client, error) {
	return newBlocking(&goRedisRR{goRedis: newGoRedis(e), opt: e.opt}, e.sink), nil
}

func (g *goRedisRR) call(ctx context.Context, r *request, ans *sim.Answer) {
	budget := g.opt.SimpleBudget
	if r.complex {
		budget = g.opt.ComplexBudget
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	r.answerBase(ans, 1)
	if err := g.readOnce(ctx, g.pick(nil), r, ans); err != nil {
		finishRedis(ans, err)
	}
}

// goRedisFailsafe is go-redis per replica with failsafe-go's hedging, as
// failsafe-go's docs compose it: a timeout of the budget outside a hedge
// policy with delay x and n hedges, cancelled by the first good answer
// only, each attempt on a replica not tried yet.
type goRedisFailsafe struct {
	*goRedis
	simple, complex failsafe.Executor[*sim.Answer]
}

func newGoRedisFailsafe(e *env) (client, error) {
	hedge := func(budget, x time.Duration) failsafe.Executor[*sim.Answer] {
		return failsafe.With[*sim.Answer](
			timeout.New[*sim.Answer](budget),
			hedgepolicy.NewBuilderWithDelay[*sim.Answer](x).
				WithMaxHedges(e.retries).
				CancelIf(func(_ *sim.Answer, err error) bool { return err == nil }).
				Build(),
		)
	}
	return newBlocking(&goRedisFailsafe{goRedis: newGoRedis(e),
		simple:  hedge(e.opt.SimpleBudget, retry.SimpleDeadlines(e.opt.SimpleBudget, e.retries)[0]),
		complex: hedge(e.opt.ComplexBudget, retry.ComplexWaits(e.opt.ComplexBudget, e.retries)[0]),
	}, e.sink), nil
}

func (g *goRedisFailsafe) call(ctx context.Context, r *request, ans *sim.Answer) {
	ex := g.simple
	if r.complex {
		ex = g.complex
	}
	var mu sync.Mutex
	var tried []int
	var attempts atomic.Int32
	got, err := ex.WithContext(ctx).GetWithExecution(func(exec failsafe.Execution[*sim.Answer]) (*sim.Answer, error) {
		mu.Lock()
		i := g.pick(tried)
		tried = append(tried, i)
		mu.Unlock()
		attempts.Add(1)
		a := new(sim.Answer) // each hedge its own: one wins
		if err := g.readOnce(exec.Context(), i, r, a); err != nil {
			return nil, err
		}
		return a, nil
	})
	r.answerBase(ans, max(int(attempts.Load()), 1))
	if err != nil {
		finishRedis(ans, err)
		return
	}
	ans.Result, ans.Records, ans.RecordCount = got.Result, got.Records, got.RecordCount
}
