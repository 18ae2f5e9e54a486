package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/readretry/readretry/sim"
)

// Run a tiny all-down scenario — every proxy takes requests and never
// answers — with read retry on and off, 120 requests each. What it prints
// does not depend on timing: the workload is a function of the seed, and
// every read with read retry ends with exactly one -19219 after its three
// attempts, every other request with the ordinary wait timeout.
func ExampleRun() {
	sc, _ := sim.LookupScenario("all-down")
	reports, err := sim.Run(context.Background(), sc, sim.Options{
		Requests: 120, Rate: 1000, Seed: 42,
		SimpleBudget: 60 * time.Millisecond, ComplexBudget: 120 * time.Millisecond, WaitTimeout: 150 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range reports {
		fmt.Printf("retry=%-5v requests=%d reads=%d writes=%d finals=%d -19219=%d -16659=%d max-attempts=%d missing=%d duplicated=%d passed=%v\n",
			r.Retry, r.Requests, r.Reads, r.Writes, r.FinalResults, r.ReadRetryTimeouts, r.WaitTimeouts,
			r.MaxAttempts, r.RecordsMissing, r.RecordsDuplicated, r.Passed())
	}
	// Output:
	// retry=true  requests=120 reads=111 writes=9 finals=120 -19219=111 -16659=9 max-attempts=3 missing=0 duplicated=0 passed=true
	// retry=false requests=120 reads=111 writes=9 finals=120 -19219=0 -16659=120 max-attempts=1 missing=0 duplicated=0 passed=true
}
