package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of one scenario run with read retry on or off:
// what was sent, how every request ended, how fast, at what cost in
// attempts and memory, and every correctness check that failed. Counts are
// of requests unless the name says records. The JSON keys are stable (cmd/rrsim
// -json prints them).
type Report struct {
	Scenario string  `json:"scenario"`   // the scenario's name
	Retry    bool    `json:"retry"`      // read retry on (budgets set) or off
	Seconds  float64 `json:"duration_s"` // how long requests were generated
	Rate     int     `json:"rate"`       // requests per second asked for

	Requests   uint64 `json:"requests"`    // accepted by Send: each must end with exactly one final result
	SendErrors uint64 `json:"send_errors"` // refused by Send (no proxy available, ...): no result expected
	Reads      uint64 `json:"reads"`       // of Requests: the eight read commands
	Writes     uint64 `json:"writes"`      // of Requests: the four writes (never retried)

	FinalResults      uint64 `json:"final_results"`       // responses with HaveMore unset: one per request
	OK                uint64 `json:"ok"`                  // final results that are the right answer
	ReadsOK           uint64 `json:"reads_ok"`            // reads answered right and complete
	WritesOK          uint64 `json:"writes_ok"`           // writes acknowledged
	ReadRetryTimeouts uint64 `json:"read_retry_timeouts"` // -19219, API_ERR_READ_RETRY_TIMEOUT (SPEC R9)
	WaitTimeouts      uint64 `json:"wait_timeouts"`       // -16659, API_ERR_WAIT_RSP_TIMEOUT (no read retry)
	OtherErrors       uint64 `json:"other_errors"`        // any other result code delivered (e.g. -7953 with no retry left)

	Retries          uint64  `json:"retries"`              // re-sends the engine made (SPEC R17)
	RetriesTimeout   uint64  `json:"retries_timeout"`      // after a segment ran out
	RetriesErrorCode uint64  `json:"retries_error_code"`   // after a listed error code (SPEC R8)
	RetriesRefused   uint64  `json:"retries_refused"`      // re-sends the storm guard refused (SPEC R19)
	Attempts         uint64  `json:"attempts"`             // packets sent, summed over requests at their final result
	AttemptsPerReq   float64 `json:"attempts_per_request"` // Attempts / Requests
	ExtraAttemptsPct float64 `json:"extra_attempts_pct"`   // (attempts − requests) / requests × 100
	MaxAttempts      int     `json:"max_attempts"`         // the most any one request used

	DuplicatesDropped uint64 `json:"duplicates_dropped"`   // packets and records the engine dropped (SPEC R7, R12)
	RecordsDelivered  uint64 `json:"records_delivered"`    // records handed to the caller, checked one by one
	RecordsMissing    uint64 `json:"records_missing"`      // records never delivered for a request that ended OK
	RecordsDuplicated uint64 `json:"records_duplicated"`   // records delivered more than once
	RecordsOutOfOrder uint64 `json:"records_out_of_order"` // index-read records not in stream order
	RecordsWrong      uint64 `json:"records_wrong"`        // wrong key, value, result or tag

	FinalsMissing     uint64 `json:"finals_missing"`      // requests with no final result at the end
	FinalsDuplicated  uint64 `json:"finals_duplicated"`   // responses after a request's final result
	BadUserBuffer     uint64 `json:"bad_user_buffer"`     // user buffer not byte for byte as sent
	BadAsyncID        uint64 `json:"bad_async_id"`        // async ID of no request sent
	BadSeq            uint64 `json:"bad_seq"`             // sequence number other than Send's
	AttemptsOverLimit uint64 `json:"attempts_over_limit"` // requests with more than MaxRetries+1 attempts
	ContextsLeaked    int64  `json:"contexts_leaked"`     // read retry contexts still held at the end
	RequestsLeaked    int    `json:"requests_leaked"`     // requests the engine still tracked at the end
	TimersLeaked      int    `json:"timers_leaked"`       // timers still pending at the end

	P50Ms  float64 `json:"p50_ms"`  // reads' time from Send to final result
	P99Ms  float64 `json:"p99_ms"`  // 99th percentile, ms
	P999Ms float64 `json:"p999_ms"` // 99.9th percentile, ms
	MaxMs  float64 `json:"max_ms"`  // the slowest read, ms

	// MaxStallMs is the longest the client's goroutines went without
	// running beyond their own waits (the sender's 1 ms tick, the poller's
	// sleep): a machine that is busy or paused shows here, and every
	// latency and timeout of the run includes it.
	MaxStallMs float64 `json:"max_stall_ms"`

	PeakContexts    int64  `json:"peak_contexts"`     // most read retry contexts held at once (SPEC R2, R15)
	BytesPerContext int64  `json:"bytes_per_context"` // context table memory / requests held, at the fullest sample
	CapHits         uint64 `json:"cap_hits"`          // reads sent without a context at the cap (SPEC R2)

	// Capacity figures: set by a capacity scenario (Scenario.Load) only.
	Offered             int     `json:"offered_rate,omitempty"`           // reads per second asked for
	RateReached         float64 `json:"rate_reached,omitempty"`           // reads per second issued over the sending phase
	ContextsGoal        int64   `json:"contexts_goal,omitempty"`          // the peak contexts the load should hold
	HeapBytesPerContext float64 `json:"heap_bytes_per_context,omitempty"` // live heap the client grew by at the plateau / contexts held then
	HeapContexts        int64   `json:"heap_contexts,omitempty"`          // the contexts held when the heap was measured
	R15BytesPerContext  float64 `json:"r15_bytes_per_context,omitempty"`  // the R15 formula of BENCHMARKS.md for the same reads: frame + user buffer + R15OverheadBytes
	GCPauses            uint64  `json:"gc_pauses,omitempty"`              // stop-the-world GC pauses during the run
	GCPauseP99Ms        float64 `json:"gc_pause_p99_ms,omitempty"`        // their 99th percentile (histogram bucket bound), ms
	CPUNsPerRead        float64 `json:"cpu_ns_per_read,omitempty"`        // this process's CPU time / reads: engine, transport, generator and checker
	ProxiesRemote       bool    `json:"proxies_remote,omitempty"`         // the proxies ran in a child process (else the figures include them)

	// Churn holds a churn scenario's figures (Scenario.Churn); nil otherwise.
	Churn *ChurnFigures `json:"churn,omitempty"`

	// Violations describes each broken invariant (at most a few examples
	// per kind); empty when the run is correct.
	Violations []string `json:"violations"`

	// Latencies are the reads' times to final result, sorted ascending
	// (for plots; not in JSON).
	Latencies []time.Duration `json:"-"`
}

// ChurnFigures are a churn run's counts and its samples at the start and
// the end (Churn says when and what flat means).
type ChurnFigures struct {
	Redeploys    int         `json:"redeploys"`     // times the proxies moved to new endpoints
	ZonesAdded   int         `json:"zones_added"`   // extra zones added
	ZonesRemoved int         `json:"zones_removed"` // extra zones removed
	FleetSize    int         `json:"fleet_size"`    // proxies per deploy
	Start        ChurnSample `json:"start"`         // at the end of the second period
	End          ChurnSample `json:"end"`           // at the end of the last period
}

// ChurnSample is one sample of a churn run.
type ChurnSample struct {
	AtS        float64 `json:"at_s"`        // seconds into the run
	Goroutines int     `json:"goroutines"`  // the process's (every client, the fleet, the checker)
	HeapMiB    float64 `json:"heap_mib"`    // the process's live heap after a GC, MiB
	Conns      int     `json:"conns"`       // this client's transport: connections up
	Proxies    int     `json:"proxies"`     // this client's transport: proxies open (not released)
	ProxyIDs   int     `json:"proxy_ids"`   // this client's ProxyIDs in use (routed or draining)
	DialsPerS  float64 `json:"dials_per_s"` // this client's transport: connection attempts per second over the period
	Zones      int     `json:"zones"`       // zones this client serves
}

// ChurnLines describes the churn runs' figures, one line per run, for
// rrsim's output.
func ChurnLines(reports []Report) []string {
	var out []string
	for i := range reports {
		r := &reports[i]
		ch := r.Churn
		if ch == nil {
			continue
		}
		mode := "off"
		if r.Retry {
			mode = "on"
		}
		s, e := ch.Start, ch.End
		out = append(out, fmt.Sprintf("churn (retry %s): %d redeploys of %d proxies, %d zones added, %d removed; start (%.0f s) → end (%.0f s): goroutines %d → %d, heap %.1f → %.1f MiB, connections %d → %d, proxies open %d → %d, ProxyIDs %d → %d, dials/s %.1f → %.1f, zones %d → %d",
			mode, ch.Redeploys, ch.FleetSize, ch.ZonesAdded, ch.ZonesRemoved, s.AtS, e.AtS, s.Goroutines, e.Goroutines, s.HeapMiB, e.HeapMiB,
			s.Conns, e.Conns, s.Proxies, e.Proxies, s.ProxyIDs, e.ProxyIDs, s.DialsPerS, e.DialsPerS, s.Zones, e.Zones))
	}
	return out
}

// Passed reports whether every invariant held.
func (r *Report) Passed() bool { return len(r.Violations) == 0 }

// ReadsOKPct returns the share of reads answered right, in percent.
func (r *Report) ReadsOKPct() float64 { return pct(r.ReadsOK, r.Reads) }

// OKPct returns the share of requests answered right, in percent.
func (r *Report) OKPct() float64 { return pct(r.OK, r.Requests) }

func pct(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// finishLatency sorts the latencies and fills the percentiles.
func (r *Report) finishLatency() {
	slices.Sort(r.Latencies)
	r.P50Ms = ms(quantile(r.Latencies, 0.50))
	r.P99Ms = ms(quantile(r.Latencies, 0.99))
	r.P999Ms = ms(quantile(r.Latencies, 0.999))
	if n := len(r.Latencies); n > 0 {
		r.MaxMs = ms(r.Latencies[n-1])
	}
}

// FormatMs formats v milliseconds as the tables print latencies: whole
// milliseconds from 100, one decimal from 10, two below, then "ms".
func FormatMs(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "ms"
}

// WriteTable prints reports as a table, one line per report, so that a
// scenario's retry-on line stands above its retry-off line. The columns fit
// 120 characters: scenario, retry, ok%, rd-ok% (reads ok), -19219,
// err (other errors), p50, p99, p99.9, att/req, refused (re-sends the storm
// guard refused, SPEC R19), dups (packets and records dropped as
// duplicates), miss/dbl (records missing and delivered twice: must be 0/0),
// check. With wide, also requests, peak-ctx (most contexts held at once)
// and B/ctx (heap per context the table's minimum chunks cost at that
// count, a capacity figure rather than a per-request one).
func WriteTable(w io.Writer, reports []Report, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	head := "scenario\tretry\tok%\trd-ok%\t-19219\terr\tp50\tp99\tp99.9\tatt/req\trefused\tdups\tmiss/dbl\tcheck\t"
	if wide {
		head += "requests\tpeak-ctx\tB/ctx\t"
	}
	fmt.Fprintln(tw, head)
	last := ""
	for i := range reports {
		r := &reports[i]
		name := r.Scenario
		if name == last {
			name = ""
		}
		last = r.Scenario
		mode := "off"
		if r.Retry {
			mode = "on"
		}
		check := "ok"
		if !r.Passed() {
			check = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%d\t%d\t%s\t%s\t%s\t%.3f\t%d\t%d\t%d/%d\t%s\t",
			name, mode, r.OKPct(), r.ReadsOKPct(), r.ReadRetryTimeouts, r.WaitTimeouts+r.OtherErrors,
			FormatMs(r.P50Ms), FormatMs(r.P99Ms), FormatMs(r.P999Ms), r.AttemptsPerReq, r.RetriesRefused, r.DuplicatesDropped,
			r.RecordsMissing, r.RecordsDuplicated, check)
		if wide {
			fmt.Fprintf(tw, "%d\t%d\t%d\t", r.Requests, r.PeakContexts, r.BytesPerContext)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// Target is one of the goals the scenarios are judged by (issue 6), with
// what a run measured.
type Target struct {
	Name string // what is measured
	Want string // the goal, in words
	Got  string // what the run measured
	Met  bool   // whether the goal was reached
}

// Targets evaluates the goals that the given reports allow: blackhole-host
// reads ok with retry ≥ 99.9% (without, reported for contrast: first
// sends still skip a stalled proxy, so more than the 75% of blind round
// robin over 4 hosts), the
// same with two hosts of which one is dark (blackhole-two-hosts, SPEC §7
// R13 round 3),
// slow-tail p99.9 with retry at least 5× lower at under 10% extra attempts,
// steady under 1% extra attempts, and nothing missing or duplicated
// anywhere. A goal whose scenario did not run is left out.
func Targets(reports []Report) []Target {
	find := func(name string, retry bool) *Report {
		for i := range reports {
			if reports[i].Scenario == name && reports[i].Retry == retry {
				return &reports[i]
			}
		}
		return nil
	}
	var out []Target
	if on, off := find("blackhole-host", true), find("blackhole-host", false); on != nil && off != nil {
		out = append(out, Target{
			Name: "blackhole-host reads ok",
			Want: "on >= 99.9%, off > 75% (health only)",
			Got:  fmt.Sprintf("on %.3f%%, off %.2f%%", on.ReadsOKPct(), off.ReadsOKPct()),
			Met:  on.ReadsOKPct() >= 99.9,
		})
	}
	if on, off := find("blackhole-two-hosts", true), find("blackhole-two-hosts", false); on != nil && off != nil {
		out = append(out, Target{
			Name: "blackhole-two-hosts reads ok",
			Want: "on >= 99.9% with the default storm guard, off > 50%",
			Got:  fmt.Sprintf("on %.3f%%, off %.2f%%, %d re-sends refused", on.ReadsOKPct(), off.ReadsOKPct(), on.RetriesRefused),
			Met:  on.ReadsOKPct() >= 99.9,
		})
	}
	if on, off := find("slow-tail", true), find("slow-tail", false); on != nil && off != nil {
		ratio := math.Inf(1)
		if on.P999Ms > 0 {
			ratio = off.P999Ms / on.P999Ms
		}
		out = append(out, Target{
			Name: "slow-tail p99.9",
			Want: ">= 5x lower with retry, < 10% extra attempts",
			Got:  fmt.Sprintf("%s vs %s (%.1fx), %.2f%% extra attempts", FormatMs(on.P999Ms), FormatMs(off.P999Ms), ratio, on.ExtraAttemptsPct),
			Met:  ratio >= 5 && on.ExtraAttemptsPct < 10,
		})
	}
	if on := find("all-down", true); on != nil {
		out = append(out, Target{
			Name: "all-down attempts",
			Want: "<= 1.5 per request with the storm guard",
			Got:  fmt.Sprintf("%.3f, %d re-sends refused", on.AttemptsPerReq, on.RetriesRefused),
			Met:  on.AttemptsPerReq <= 1.5,
		})
	}
	if on := find("steady", true); on != nil {
		out = append(out, Target{
			Name: "steady extra attempts",
			Want: "< 1%",
			Got:  fmt.Sprintf("%.3f%%", on.ExtraAttemptsPct),
			Met:  on.ExtraAttemptsPct < 1,
		})
	}
	for i := range reports {
		if r := &reports[i]; r.Offered > 0 {
			out = append(out, capacityTargets(r)...)
		}
	}
	if len(reports) > 0 {
		var miss, dup uint64
		var failed []string
		for i := range reports {
			miss += reports[i].RecordsMissing
			dup += reports[i].RecordsDuplicated
			if !reports[i].Passed() {
				failed = append(failed, reports[i].Scenario)
			}
		}
		got := fmt.Sprintf("%d missing, %d duplicated", miss, dup)
		if len(failed) > 0 {
			got += "; invariants broken in " + strings.Join(slices.Compact(failed), ", ")
		}
		out = append(out, Target{Name: "exactly once", Want: "0 missing, 0 duplicated, all invariants", Got: got,
			Met: miss == 0 && dup == 0 && len(failed) == 0})
	}
	return out
}

// capacityTargets are a capacity run's goals (issue 14): the contexts
// held at the offered load — a machine that could not offer it is reported
// with the rate it reached, never as a pass — the heap per context against
// the R15 formula of BENCHMARKS.md, GC pauses, and whether the poller kept up.
func capacityTargets(r *Report) []Target {
	where := ""
	if !r.ProxiesRemote {
		where = " (proxies in this process: heap and CPU include them)"
	}
	out := []Target{{
		Name: r.Scenario + " contexts",
		Want: fmt.Sprintf(">= %d held at %d reads/s", r.ContextsGoal, r.Offered),
		Got:  fmt.Sprintf("peak %d; rate reached %.0f/s (%.1f%%)", r.PeakContexts, r.RateReached, 100*r.RateReached/float64(r.Offered)),
		Met:  r.PeakContexts >= r.ContextsGoal && r.RateReached >= 0.99*float64(r.Offered),
	}}
	dev := math.Inf(1)
	if r.R15BytesPerContext > 0 && r.HeapContexts > 0 {
		dev = 100 * (r.HeapBytesPerContext/r.R15BytesPerContext - 1)
	}
	out = append(out, Target{
		Name: r.Scenario + " heap per context",
		Want: "within 10% of the memory formula: frame + user buffer + " + strconv.Itoa(R15OverheadBytes),
		Got:  fmt.Sprintf("%.0f B vs %.0f B (%+.1f%%) at %d contexts%s", r.HeapBytesPerContext, r.R15BytesPerContext, dev, r.HeapContexts, where),
		Met:  math.Abs(dev) <= 10,
	})
	out = append(out, Target{
		Name: r.Scenario + " GC pause p99",
		Want: "<= 1 ms",
		Got:  fmt.Sprintf("%s over %d pauses; CPU %.2f µs per read%s", FormatMs(r.GCPauseP99Ms), r.GCPauses, r.CPUNsPerRead/1e3, where),
		Met:  r.GCPauses > 0 && r.GCPauseP99Ms <= 1,
	})
	out = append(out, Target{
		Name: r.Scenario + " poller kept up",
		Want: fmt.Sprintf("max stall < %d ms", StallNoteMs),
		Got:  fmt.Sprintf("max stall %s", FormatMs(r.MaxStallMs)),
		Met:  r.MaxStallMs < StallNoteMs,
	})
	return out
}

// StallNoteMs is the stall above which Notes mentions a run.
const StallNoteMs = 50

// Notes returns remarks a reader needs to judge the figures: runs whose
// client stalled more than StallNoteMs (the machine was busy or paused, so
// timeouts and tails there are not the proxies' doing).
func Notes(reports []Report) []string {
	var out []string
	for i := range reports {
		r := &reports[i]
		if r.MaxStallMs > StallNoteMs {
			mode := "off"
			if r.Retry {
				mode = "on"
			}
			out = append(out, fmt.Sprintf("note: %s (retry %s): the client stalled for up to %s (machine busy or paused); its latencies and timeouts include that",
				r.Scenario, mode, FormatMs(r.MaxStallMs)))
		}
	}
	return out
}

// WriteTargets prints targets, one per line.
func WriteTargets(w io.Writer, targets []Target) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range targets {
		mark := "met"
		if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(tw, "target\t%s\t%s\twant %s\tgot %s\n", mark, t.Name, t.Want, t.Got)
	}
	return tw.Flush()
}
