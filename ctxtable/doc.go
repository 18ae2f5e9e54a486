// Package ctxtable is where every in-flight read waits for its answer: a
// sharded table from a request's 64-bit sequence number to its context — a
// fixed-size meta value, the packed request frame, the caller's user buffer
// and zeroed scratch bytes (SPEC R2, R12, R15).
//
// # Design
//
// A Table has a power-of-two number of shards, each with its own mutex, key
// index and storage. Under the default PlaceCounter the low bits of the
// sequence number pick the shard, so the numbers of a counter go round-robin
// over the shards and concurrent senders rarely meet on a lock.
//
// A shard's key index has two parts (see PlaceCounter). The ring is a
// direct-mapped array: the bits above the shard bits, mod its odd length,
// name the cell, so a counter's numbers sit in consecutive cells and need no
// probing. A number whose cell is taken (a straggler that outlived a lap of
// the ring, or any other key pattern) goes to the overflow: an
// open-addressing Robin Hood table with linear probing and backward-shift
// deletion (no tombstones, so probe lengths stay flat under endless churn),
// keyed by a 64-bit multiplicative mixer whose bits are independent of the
// shard bits. Both parts hold 16-byte entries (sequence number, slot id),
// grow at load 7/8, shrink at 1/8, and are sized so a table at its cap sits
// near load 0.85. PlaceHashed skips the ring and hashes everything, for keys
// not drawn from a counter.
//
// Contexts never live in the index. The meta value lives in a slot of a
// pointer-free slab; the frame, user buffer and scratch live in one block of
// a size-class byte slab (8-byte steps up to 256 bytes, then 8 classes per
// doubling up to 8 KiB; larger payloads get their own allocation, counted in
// Stats). Slabs are made of chunks of up to 256 KiB that the garbage
// collector marks as single noscan objects: 500,000 contexts are about 900
// heap objects with about 0.07 bytes per context for the GC to scan, and a
// forced GC cycle with them resident is within measurement noise (< 1 ms)
// of one with the table empty (BenchmarkMemory). Empty chunks go back to the Go heap
// (one spare per slab is kept), so the heap returns to its size before a
// burst once the burst's contexts are deleted. The index moves entries on
// insert, delete and resize; slots and blocks never move, which is why a Ref
// stays valid.
//
// # Memory (SPEC R15)
//
// A context costs len(frame) + len(userBuf) + scratch rounded up to its
// size class (≤ 7 bytes up to 256 bytes, ≤ 12.5% above), plus
// unsafe.Sizeof(M) rounded up to 8, plus table overhead: a 32-byte slot
// header, ~19 bytes of index at the cap's load, and chunk slack.
// BenchmarkMemory measures 56 bytes per context beyond frame + user buffer
// + meta, size-class rounding included (~10 of them). So read qps × budget
// (s) × (frame + user buffer + meta + 56 bytes) predicts the footprint.
//
// # The cap (SPEC R2)
//
// Insert returns ErrFull when the table holds Cap contexts; the engine then
// sends the read without a context. The cap is exact without a shared
// counter on the hot path: shards take units of it from a pool in batches
// and return them, and near the cap they trade single units.
// SetCap changes it at run time for later inserts and never drops a live
// context.
//
// # Concurrency contract
//
// Every method of *Table is safe for concurrent use by any number of
// goroutines. Operations on different shards never contend; operations on
// one shard hold its mutex only for the index probe, the slab bookkeeping and
// Insert's copy, never while calling out (Range calls its callback with no
// lock held, so a panic there leaves nothing locked). Len takes no lock.
//
// The table does not lock a context's memory. A Ref points straight into the
// slabs; the rules for the memory behind it are:
//
//  1. Everything Insert wrote (meta, frame and user buffer copies, zeroed
//     scratch) happens before any Lookup of that sequence number that
//     returns it, in any goroutine.
//  2. A Ref stays valid — the same addresses, whatever other contexts are
//     inserted or deleted and however the index grows or shrinks — until
//     Delete of its sequence number is called. From then on its slot and
//     block belong to the next Insert: the caller must not use the Ref, or
//     any slice it returned, after calling Delete, and must make sure no
//     other goroutine does.
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
// mark, and a payload above 8 KiB allocates its own block.
package ctxtable
