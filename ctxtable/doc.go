// Package ctxtable is where every in-flight read waits for its answer: a
// sharded table from a request's 64-bit sequence number to its context — a
// fixed-size meta value, the packed request frame, the caller's user buffer
// and zeroed scratch bytes (SPEC R2, R12, R15).
//
// # Design
//
// A Table has a power-of-two number of shards, each with its own mutex, key
// index and storage. The low bits of the sequence number pick the shard, so
// the numbers of a counter go round-robin over the shards and concurrent
// senders rarely meet on a lock.
//
// A context is one block of memory: a 24-byte header (sequence number,
// lengths), the meta, the user buffer, the frame and the scratch, in a
// slab of its size class (8-byte steps up to 256 bytes, then 8 classes per
// doubling up to 8 KiB; larger contexts get their own allocation, counted
// in Stats). An answer touches the header, the meta and the user buffer,
// which sit in the block's first cache lines. Slabs are made of chunks of up
// to 256 KiB that the garbage collector marks as single noscan objects:
// 500,000 contexts are about a thousand heap objects with well under a byte
// per context for the GC to scan, and a forced GC cycle with them resident
// is within measurement noise of one with the table empty
// (BenchmarkMemory). A slab hands out blocks in address order (next fit),
// so contexts lie in memory in the order they were inserted and a poller
// meeting answers in about send order walks memory in about address order;
// see slab.go for the measurement against a LIFO free list. The table
// helps the hardware along: Insert prefetches the block after the one it
// took (the next Insert's, next fit), and Lookup the two blocks after the
// answered one while the shard's recent Lookups continue streams through
// memory (not when answers scatter, where it would only add traffic), once
// the slab outgrows a core's cache (256 KiB of contexts in the class). A
// shard whose answers interleave two proxies' streams at different lags is
// otherwise one cache miss per answer under the lock. Measured on a 2-core
// VM against the table without prefetching (benchstat, n=8, alternating
// builds): BenchmarkInsertLookupDelete 7% faster single and 19% parallel
// (two such shards per goroutine), BenchmarkLookup in send order 31% and
// 66%, scattered lookups unchanged, a miss 1 ns slower. The prefetch is
// PREFETCHT0 in assembly on amd64 and nothing elsewhere.
//
// Lock-free Lookup (atomic loads of a published ring and chunk directory,
// the block's sequence number checked after) was measured and left out:
// Go's atomic stores are locked XCHGs on amd64, and the cells Insert and
// Delete must then store atomically cost about what the lock pair Lookup
// saves; with no contention between shards the single-goroutine cycle got
// 4–8% slower and the parallel one no faster.
//
// A shard's key index (index.go) is a direct-mapped ring of 8-byte cells
// — the 32 bits of the sequence number above the shard bits name the cell,
// so a counter's numbers sit in consecutive cells and need no probing —
// and, for what the ring cannot hold (a straggler that outlived a lap of
// the ring, numbers that differ only above those 32 bits), an
// open-addressing Robin Hood overflow with backward-shift deletion, keyed
// by a 64-bit mixer. The ring grows at load 7/8 to load 3/4 and shrinks at
// 1/8; the overflow doubles and halves. The index moves entries on insert,
// delete and resize; blocks never move, which is why a Ref stays valid.
//
// # Memory (SPEC R15)
//
// A context costs len(frame) + len(userBuf) + scratch + unsafe.Sizeof(M)
// rounded up to 8, plus the table's own share: the 24-byte header, about
// 10 bytes of ring at the ring's load, the rounding to the size class (at
// most 7 bytes up to 256 bytes, 12.5% above) and chunk slack.
// BenchmarkMemory reports the table's share at 500,000 contexts
// (overhead-B/ctx), so read qps × budget (s) × (frame + user buffer + meta
// + overhead) predicts the footprint. An idle table is its headers, a few
// hundred bytes per shard (BenchmarkIdle); a table that emptied keeps its
// smallest ring per shard and gives every slab chunk back.
//
// # No cap of its own (SPEC R2)
//
// A Table holds as many contexts as it is given (up to 2^25 per shard and
// size class, then ErrFull). The cap of SPEC R2 has one owner, the
// engine, which counts its contexts per zone and sends a read over the cap
// without inserting it; a table-level cap would be a second count of the
// same thing, kept consistent at a price on every Insert and Delete.
//
// # Concurrency contract
//
// Every method of *Table is safe for concurrent use by any number of
// goroutines. Operations on different shards never contend; operations on
// one shard hold its mutex only for the index probe, the slab bookkeeping and
// Insert's copy, never while calling out (Range calls its callback with no
// lock held, so a panic there leaves nothing locked).
//
// The table does not lock a context's memory. A Ref points straight into the
// slabs; the rules for the memory behind it are:
//
//  1. Everything Insert wrote (meta, frame and user buffer copies, zeroed
//     scratch) happens before any Lookup of that sequence number that
//     returns it, in any goroutine.
//  2. A Ref stays valid — the same addresses, whatever other contexts are
//     inserted or deleted and however the index grows or shrinks — until
//     Delete of its sequence number is called. From then on its block
//     belongs to the next Insert: the caller must not use the Ref, or any
//     slice it returned, after calling Delete, and must make sure no other
//     goroutine does.
//  3. Reads and writes through Refs are synchronized by the caller. The
//     engine's pattern needs nothing more: senders fill in the meta before
//     Insert, send from their own buffer (not Ref.Frame), and after Insert
//     returns touch the context no more; one poller goroutine owns every
//     context from then on: it calls Lookup, updates Meta and Scratch in
//     place, rebuilds or patches the frame, and calls Delete. Several
//     pollers may share a table as long as one sequence number is handled
//     by one poller at a time.
//
// At steady state Insert, Lookup and Delete do not allocate
// (BenchmarkInsertLookupDelete reports 0 allocs/op); chunks and index
// arrays are allocated only while the table grows toward a new high-water
// mark, and a context above 8 KiB allocates its own block.
package ctxtable
