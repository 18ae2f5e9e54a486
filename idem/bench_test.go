package idem_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/redistest"
	"github.com/readretry/readretry/idem/internal/sqltest"
	"github.com/readretry/readretry/idem/redisstore"
	"github.com/readretry/readretry/idem/sqlstore"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"
)

// keyGen writes distinct UUID-shaped 36-byte keys into one buffer, without
// allocating: the goroutine number and a counter as hex digits.
type keyGen struct {
	buf [36]byte
	n   uint64
}

var goroutineIDs atomic.Uint64

func newKeyGen() *keyGen {
	g := &keyGen{}
	copy(g.buf[:], "00000000-0000-4000-8000-000000000000")
	putHex(g.buf[0:8], goroutineIDs.Add(1))
	return g
}

func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
}

// next returns the next key; valid until the following call.
func (g *keyGen) next() []byte {
	g.n++
	putHex(g.buf[24:36], g.n)
	return g.buf[:]
}

var sinkFence idem.Fence

// BenchmarkMemoryClaim is the hot path of SPEC I1: a claim with a []byte
// key, 0 allocs/op.
//
//   - new: fresh keys on a fake clock that moves 1 µs per claim with a
//     1 ms ttl, so ~1,000 entries are live and the wheel expires one entry
//     per claim: the steady state of a busy store.
//   - new-parallel: the same with b.RunParallel on the real clock (ttl
//     2 ms).
//   - repeat, repeat-parallel: claims of live keys (a duplicate: 0).
//   - claim+release-parallel: a fresh claim and its release per op.
func BenchmarkMemoryClaim(b *testing.B) {
	ctx := context.Background()
	b.Run("new", func(b *testing.B) {
		clk := newFakeClock()
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 16, Tick: time.Millisecond, Clock: clk.Now})
		g := newKeyGen()
		b.ReportAllocs()
		for b.Loop() {
			clk.Advance(time.Microsecond)
			f, err := m.Claim(ctx, g.next(), time.Millisecond)
			if err != nil || f == 0 {
				b.Fatal(f, err)
			}
			sinkFence = f
		}
		b.ReportMetric(float64(m.Len()), "live-entries")
	})
	b.Run("new-parallel", func(b *testing.B) {
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 20, Tick: time.Millisecond})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := newKeyGen()
			for pb.Next() {
				f, err := m.Claim(ctx, g.next(), 2*time.Millisecond)
				if err != nil || f == 0 {
					b.Error(f, err)
					return
				}
			}
		})
	})
	live := func(b *testing.B) (*idem.Memory, [][]byte) {
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 12})
		g := newKeyGen()
		keys := make([][]byte, 1024)
		for i := range keys {
			keys[i] = append([]byte(nil), g.next()...)
			m.Claim(ctx, keys[i], time.Hour)
		}
		return m, keys
	}
	b.Run("repeat", func(b *testing.B) {
		m, keys := live(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if f, _ := m.Claim(ctx, keys[i&1023], time.Hour); f != 0 {
				b.Fatal("repeat won")
			}
			i++
		}
	})
	b.Run("repeat-parallel", func(b *testing.B) {
		m, keys := live(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if f, _ := m.Claim(ctx, keys[i&1023], time.Hour); f != 0 {
					b.Error("repeat won")
					return
				}
				i++
			}
		})
	})
	b.Run("claim+release-parallel", func(b *testing.B) {
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 12})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := newKeyGen()
			for pb.Next() {
				k := g.next()
				f, err := m.Claim(ctx, k, time.Minute)
				if err != nil || f == 0 {
					b.Error(f, err)
					return
				}
				if err := m.Release(ctx, k, f); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkDo is idem.Do on the memory store — claim, run, extension
// registration with the shared keeper, complete — against the same
// store's bare Claim+Complete in the same run (ratio reported as
// x-bare). Sequential calls start and stop the keeper's loop each time
// (it runs only while a claim is held); parallel ones keep it running.
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	result := []byte("order 42")
	fn := func(context.Context) ([]byte, error) { return result, nil }
	ttl := idem.TTL{Pending: time.Minute, Done: time.Millisecond}
	run := func(b *testing.B, parallel bool, do func(g *keyGen) error) float64 {
		start := time.Now()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				g := newKeyGen()
				for pb.Next() {
					if err := do(g); err != nil {
						b.Error(err)
						return
					}
				}
			})
		} else {
			g := newKeyGen()
			for b.Loop() {
				if err := do(g); err != nil {
					b.Fatal(err)
				}
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	for _, parallel := range []bool{false, true} {
		name := "sequential"
		if parallel {
			name = "parallel"
		}
		var bare float64
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 20, Tick: time.Millisecond})
		b.Run(name+"/bare-claim+complete", func(b *testing.B) {
			b.ReportAllocs()
			bare = run(b, parallel, func(g *keyGen) error {
				k := g.next()
				f, err := m.Claim(ctx, k, ttl.Pending)
				if err != nil {
					return err
				}
				return m.Complete(ctx, k, f, result, ttl.Done)
			})
		})
		b.Run(name+"/Do", func(b *testing.B) {
			b.ReportAllocs()
			ns := run(b, parallel, func(g *keyGen) error {
				_, _, err := idem.Do(ctx, m, g.next(), ttl, fn)
				return err
			})
			if bare > 0 {
				b.ReportMetric(ns/bare, "x-bare")
			}
		})
	}
}

// BenchmarkBaselineSyncMap is the same-run baseline for the memory store:
// sync.Map.LoadOrStore of fresh keys, then Delete — "first time?" without
// expiry, bounds or stored results — and Load of live keys.
func BenchmarkBaselineSyncMap(b *testing.B) {
	b.Run("claim+delete-parallel", func(b *testing.B) {
		var m sync.Map
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := newKeyGen()
			for pb.Next() {
				k := string(g.next())
				if _, loaded := m.LoadOrStore(k, struct{}{}); loaded {
					b.Error("fresh key loaded")
					return
				}
				m.Delete(k)
			}
		})
	})
	b.Run("repeat-parallel", func(b *testing.B) {
		var m sync.Map
		g := newKeyGen()
		keys := make([][]byte, 1024)
		for i := range keys {
			keys[i] = append([]byte(nil), g.next()...)
			m.Store(string(keys[i]), struct{}{})
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				// sync.Map keys are interfaces: the string is boxed,
				// one allocation per lookup.
				if _, ok := m.Load(string(keys[i&1023])); !ok {
					b.Error("missing")
					return
				}
				i++
			}
		})
	})
}

// BenchmarkMemoryFootprint reports the heap held per live entry of a full
// store (36-byte keys, no results), for sizing Capacity.
func BenchmarkMemoryFootprint(b *testing.B) {
	const n = 1 << 16
	ctx := context.Background()
	var perEntry float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := newMemory(b, idem.MemoryConfig{Capacity: n})
		g := newKeyGen()
		for range n * 15 / 16 {
			if _, err := m.Claim(ctx, g.next(), time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(m.Len())
		runtime.KeepAlive(m)
	}
	b.ReportMetric(perEntry, "B/entry")
}

// BenchmarkRedisClaim is the Redis store's claim — one SET NX PX round
// trip on loopback to a real redis-server started for the run — reported
// beside the memory store's. It skips without redis-server outside CI.
func BenchmarkRedisClaim(b *testing.B) {
	ctx := context.Background()
	addr := redistest.Addr(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * runtime.GOMAXPROCS(0)})
	defer c.Close()
	if err := c.FlushDB(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) { benchClaims(b, s) })
	b.Run("new-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := newKeyGen()
			for pb.Next() {
				f, err := s.Claim(ctx, g.next(), 10*time.Second)
				if err != nil || f == 0 {
					b.Error(f, err)
					return
				}
			}
		})
	})
}

// BenchmarkRedisClusterClaim is BenchmarkRedisClaim on the three-master
// test cluster: still one round trip, to the key's master.
func BenchmarkRedisClusterClaim(b *testing.B) {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.ClusterAddrs(b), PoolSize: 4 * runtime.GOMAXPROCS(0)})
	defer c.Close()
	s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	benchClaims(b, s)
}

// BenchmarkServerSQLClaim is the SQL store's claim — one INSERT in
// autocommit — on the real PostgreSQL and MariaDB servers the tests use
// (fsync off: the figure is the round trip and the statement, not the
// disk).
func BenchmarkServerSQLClaim(b *testing.B) {
	for _, srv := range []struct {
		name string
		get  func(testing.TB) *sqltest.Server
	}{{"Postgres", sqltest.Postgres}, {"MariaDB", sqltest.MariaDB}} {
		b.Run(srv.name, func(b *testing.B) {
			db := srv.get(b).Open(b, 4)
			d, err := sqlstore.DialectOf(db)
			if err != nil {
				b.Fatal(err)
			}
			benchClaims(b, newSQLStore(b, db, d))
		})
	}
}

// BenchmarkSQLiteClaim is the SQL store's claim — one INSERT into the
// dedup table — on SQLite (modernc.org/sqlite, WAL, synchronous=NORMAL) in
// a temporary file.
func BenchmarkSQLiteClaim(b *testing.B) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "bench.db")+
		"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	benchClaims(b, newSQLStore(b, db, sqlstore.SQLite))
}

// newSQLStore returns a SQL store on db with its dedup table created.
func newSQLStore(b *testing.B, db *sql.DB, d sqlstore.Dialect) *sqlstore.Store {
	b.Helper()
	s, err := sqlstore.New(db, d, sqlstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.CreateTable(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchClaims is the sequential claim benchmark of a networked or on-disk
// store: one claim of a fresh key (ttl 10 s) per op. The interface call
// costs nothing beside a round trip or an INSERT.
func benchClaims(b *testing.B, s idem.Store) {
	ctx := context.Background()
	g := newKeyGen()
	b.ReportAllocs()
	for b.Loop() {
		f, err := s.Claim(ctx, g.next(), 10*time.Second)
		if err != nil || f == 0 {
			b.Fatal(f, err)
		}
	}
}
