// Package sim runs read retry against real TCP proxies on loopback and
// checks every answer: the main job's machinery (cmd/rrsim is its command
// line), and a harness an SDK author can point at their own settings.
//
// # Proxies
//
// A Proxy is a TCP server on 127.0.0.1 (an ephemeral port) speaking the
// wire protocol. A Fleet is the proxies of one zone spread over logical
// hosts: proxy j of host h is labelled {Host: "host-<h+1>", Port:
// 9000+j}, the label the client routes to and SPEC R13 groups re-sends by,
// and Fleet.Resolve maps it to the real address for transport/tcp. Every
// proxy serves one deterministic Dataset — keys "k<n>" whose values are a
// function of the key, part keys "p<n>" whose streams of records are a
// function of the part key and position — so that every answer can be
// checked from the request alone.
//
// Each proxy answers through a fault Profile: latency fixed or lognormal
// (from a median and a 99th percentile), the probability of silently
// dropping a request, of answering -7953, of cutting a multi-packet answer
// after N packets, of stalling, of sending a packet twice, of closing the
// connection mid-answer, the records per packet of complex answers, and
// whether it refuses connections. Profiles change while a run goes on
// (Proxy.SetProfile, Fleet.Set): a host goes dark at 20% of the run and
// comes back. A proxy's connection reads requests on one goroutine and
// writes answers on another from a timer heap: no goroutine per request.
//
// # Workload and checks
//
// The Workload generates request n from (seed, n) alone: a mix of all eight
// read commands (SPEC R4) and the four writes, batch reads of 1 to 16 keys
// (some absent), index reads from the start or a position, with or without
// a limit. Run's generator is open loop: requests go out on time whatever
// has come back, so latency is honest. A checker rebuilds each request from
// the async ID its responses carry and checks every response: the right
// value for every key, every record exactly once, index records in stream
// order, the async ID, sequence number and user buffer exactly as sent, one
// final result per request, attempts within MaxRetries+1 — and at the end,
// that the engine holds no context, request or timer any more (SPEC §6).
// A broken check is a Violation in the run's Report, never a panic.
//
// # Scenarios and reports
//
// A Scenario is a starting profile, events on a timeline and its own
// expectations (all-down: every read ends with exactly one -19219). Run
// runs one with read retry on and off at the same time, against the same
// proxies, so both meet the same faults at the same moments, and returns a
// Report per mode: counts of every kind of result, p50/p99/p99.9 latency,
// attempts per request, duplicates dropped, peak contexts and bytes per
// context. WriteTable prints reports; Targets evaluates issue 6's goals.
//
// A scenario with a Load is a capacity run (rrsim -scenario capacity): a
// fixed offered load against slow proxies, read retry on only, and the
// figures a footprint needs — peak contexts, live heap per context against
// the R15 formula of BENCHMARKS.md, GC pauses, CPU per read, the rate the machine
// reached. Its proxies can run in a child process (Options.FleetProcess,
// RemoteFleet, ServeFleet) so that those figures are the client's alone.
//
// # Other clients
//
// The pieces are exported so that another command can put a different
// client on the same faults (bench/cmd/rrcompare does): the open-loop
// generator (OpenLoop), the Checker fed with Answers, the engine as the
// runs set it up (NewEngine, PollWait), the request frames the engine
// packs (AppendRequestFrame), and Usage for CPU, heap and GC figures.
package sim
