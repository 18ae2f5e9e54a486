package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/readretry/readretry/sim"
)

// writeTable prints one line per scenario and client. Columns: reads ok
// %, extra attempts %, read latency p50/p99/p99.9, CPU per request, write
// and read calls per request on the client's connections and their
// unbatched floor (one call per frame; "-" for clients that do not count),
// context switches per request, bytes
// per request in flight (heap + stacks; inflight only), GC pause p99,
// records missing and doubled, invariants.
func writeTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tclient\trequests\treads-ok%\textra-att%\tp50\tp99\tp99.9\tcpu/req\tcalls/req\tfloor\tcsw/req\tB/in-flight\tgc-p99\trec-miss\trec-dup\tcheck\t")
	last := ""
	for _, r := range rows {
		name := r.Scenario
		if name == last {
			name = ""
		}
		last = r.Scenario
		check := "ok"
		if len(r.Violations) > 0 {
			check = "FAIL"
		}
		inflight := "-"
		if r.Inflight > 0 {
			inflight = strconv.FormatFloat(r.HeapBytesPerInflight, 'f', 0, 64)
		}
		gc := "no GC"
		if r.GCPauses > 0 {
			gc = sim.FormatMs(r.GCPauseP99Ms)
		}
		calls, floor := "-", "-"
		if r.IOCounted {
			calls = strconv.FormatFloat(r.WritesPerRequest+r.ReadsPerRequest, 'f', 2, 64)
			floor = strconv.FormatFloat(r.UnbatchedFloor, 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%s\t%s\t%s\t%.1fµs\t%s\t%s\t%.2f\t%s\t%s\t%d\t%d\t%s\t\n",
			name, r.Client, r.Requests, r.ReadsOKPct, r.ExtraAttemptsPct, sim.FormatMs(r.P50Ms), sim.FormatMs(r.P99Ms), sim.FormatMs(r.P999Ms),
			r.CPUNsPerRequest/1e3, calls, floor, r.CtxSwitchesPerRequest, inflight, gc, r.RecordsMissing, r.RecordsDuplicated, check)
	}
	_ = tw.Flush()
}

// goal is one of issue 14's goals with what the run measured.
type goal struct {
	name, want, got string
	met             bool
}

// attemptsSlack is how many points of extra attempts readretry may spend
// above a peer and still count as "no more": the goroutines client runs
// the same schedule, and the fault draws differ by a few requests.
const attemptsSlack = 0.5

// tailScenarios are the scenarios whose tails the goals compare.
var tailScenarios = []string{"slow-tail", "blackhole-host", "flapping", "stream-cut"}

// goals evaluates the goals the rows allow: readretry's p99.9 at or below
// every peer's at no more extra attempts (tail scenarios), at least 5x
// fewer bytes per request in flight than goroutines (inflight), at least
// 2x less CPU per request than every peer (steady), and nothing missing or
// doubled for any client. A goal whose rows are missing is left out.
func goals(rows []row) []goal {
	find := func(sc, client string) *row {
		for i := range rows {
			if rows[i].Scenario == sc && rows[i].Client == client {
				return &rows[i]
			}
		}
		return nil
	}
	peers := func(sc string) []*row {
		var out []*row
		for i := range rows {
			// readretry-adaptive is the engine too (opt-in hedging), not a peer.
			if rows[i].Scenario == sc && rows[i].Client != "readretry" && rows[i].Client != "readretry-adaptive" {
				out = append(out, &rows[i])
			}
		}
		return out
	}
	var out []goal
	for _, sc := range tailScenarios {
		rr := find(sc, "readretry")
		ps := peers(sc)
		if rr == nil || len(ps) == 0 {
			continue
		}
		g := goal{name: sc + " p99.9", met: true,
			want: fmt.Sprintf("readretry <= every hedging peer, extra attempts <= peer's + %.1f points", attemptsSlack)}
		parts := []string{fmt.Sprintf("readretry %s at %.1f%%", sim.FormatMs(rr.P999Ms), rr.ExtraAttemptsPct)}
		for _, p := range ps {
			verdict := ""
			switch {
			case p.ExtraAttemptsPct == 0 && rr.ExtraAttemptsPct > 0:
				// A client that made no extra attempt did not hedge (grpc-go
				// ignores a hedgingPolicy): not a design at equal spending,
				// so it does not decide the goal; its tail is shown.
				verdict = " (made no extra attempt: not hedging)"
				if p.P999Ms < rr.P999Ms {
					verdict = " (made no extra attempt, and its tail is lower)"
					g.met = false
				}
			case p.P999Ms < rr.P999Ms:
				verdict = " (peer's tail lower)"
				g.met = false
			case rr.ExtraAttemptsPct > p.ExtraAttemptsPct+attemptsSlack:
				verdict = " (peer spent fewer attempts)"
				g.met = false
			}
			parts = append(parts, fmt.Sprintf("%s %s at %.1f%%%s", p.Client, sim.FormatMs(p.P999Ms), p.ExtraAttemptsPct, verdict))
		}
		g.got = strings.Join(parts, "; ")
		out = append(out, g)
	}
	if rr, gr := find(inflightScenario, "readretry"), find(inflightScenario, "goroutines"); rr != nil && gr != nil && rr.Inflight > 0 && gr.Inflight > 0 {
		ratio := gr.HeapBytesPerInflight / rr.HeapBytesPerInflight
		parts := []string{fmt.Sprintf("readretry %.0f B (%d in flight, GC pause p99 %s, full GC %s)", rr.HeapBytesPerInflight, rr.Inflight, sim.FormatMs(rr.GCPauseP99Ms), sim.FormatMs(rr.GCFullMs))}
		for _, p := range peers(inflightScenario) {
			parts = append(parts, fmt.Sprintf("%s %.0f B (%.1fx; %d in flight, GC pause p99 %s, full GC %s)", p.Client, p.HeapBytesPerInflight,
				p.HeapBytesPerInflight/rr.HeapBytesPerInflight, p.Inflight, sim.FormatMs(p.GCPauseP99Ms), sim.FormatMs(p.GCFullMs)))
		}
		out = append(out, goal{name: "bytes per request in flight", want: ">= 5x fewer than goroutines (heap + stacks)",
			got: strings.Join(parts, "; "), met: ratio >= 5})
	}
	cpuRows := []string{}
	for _, r := range rows {
		if isCPU(r.Scenario) && !slices.Contains(cpuRows, r.Scenario) {
			cpuRows = append(cpuRows, r.Scenario)
		}
	}
	if len(cpuRows) == 0 {
		cpuRows = []string{"steady"}
	}
	for _, cpuRow := range cpuRows {
		rr := find(cpuRow, "readretry")
		if rr == nil || len(peers(cpuRow)) == 0 {
			continue
		}
		g := goal{name: "CPU per request (" + cpuRow + ")", want: ">= 2x less than every peer", met: true}
		parts := []string{fmt.Sprintf("readretry %.1f µs%s", rr.CPUNsPerRequest/1e3, callsOf(rr))}
		for _, p := range peers(cpuRow) {
			ratio := p.CPUNsPerRequest / rr.CPUNsPerRequest
			if ratio < 2 {
				g.met = false
			}
			parts = append(parts, fmt.Sprintf("%s %.1f µs (%.1fx)%s", p.Client, p.CPUNsPerRequest/1e3, ratio, callsOf(p)))
		}
		g.got = strings.Join(parts, "; ")
		out = append(out, g)
	}
	if len(rows) > 0 {
		var miss, dup uint64
		var failed []string
		for _, r := range rows {
			miss += r.RecordsMissing
			dup += r.RecordsDuplicated
			if len(r.Violations) > 0 {
				failed = append(failed, r.Scenario+"/"+r.Client)
			}
		}
		got := fmt.Sprintf("%d missing, %d duplicated", miss, dup)
		if len(failed) > 0 {
			got += "; invariants broken in " + strings.Join(failed, ", ")
		}
		out = append(out, goal{name: "exactly once", want: "0 missing, 0 duplicated, all invariants, every client", got: got,
			met: miss == 0 && dup == 0 && len(failed) == 0})
	}
	return out
}

// callsOf describes a row's system calls for the CPU goal: write and
// read calls per request, frames per call, the unbatched floor, and
// context switches per request.
func callsOf(r *row) string {
	if !r.IOCounted {
		return fmt.Sprintf(" [%.2f csw/req]", r.CtxSwitchesPerRequest)
	}
	return fmt.Sprintf(" [%.2f writes + %.2f reads/req, %.2f frames/write, %.2f frames/read, floor unbatched %.2f; %.2f csw/req]",
		r.WritesPerRequest, r.ReadsPerRequest, r.FramesPerWrite, r.FramesPerRead, r.UnbatchedFloor, r.CtxSwitchesPerRequest)
}

func writeGoals(w io.Writer, gs []goal) {
	for _, g := range gs {
		mark := "met"
		if !g.met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "goal %-6s %s: want %s\n            got  %s\n", mark, g.name, g.want, g.got)
	}
}
