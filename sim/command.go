package sim

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/readretry/readretry/retry"
)

// This file holds what rrsim and bench's rrcompare share on the command
// line, so that a comparison runs at rrsim's load and defaults unless told
// otherwise.

// FleetChildArg, as a command's only argument, makes it a fleet child: the
// process that serves ServeFleet on its standard input and output (see
// StartRemoteFleet).
const FleetChildArg = "-fleet-child"

// IsFleetChild reports whether args, a command line with the program's
// name first (os.Args), asks for a fleet child.
func IsFleetChild(args []string) bool { return len(args) == 2 && args[1] == FleetChildArg }

// FleetChild returns the running binary started again with FleetChildArg
// as its only argument and this process's standard error: the
// Options.FleetProcess of a command whose main serves ServeFleet when
// IsFleetChild(os.Args).
func FleetChild() *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, FleetChildArg)
	cmd.Stderr = os.Stderr
	return cmd
}

// Flags are the command-line flags of the Options both commands have:
// -duration, -rate, -seed, -simple, -complex, -retries and -wait.
type Flags struct {
	Duration      time.Duration // -duration: how long requests are sent
	Rate          int           // -rate: requests per second, open loop
	Seed          uint64        // -seed: of the dataset, the workload and the faults
	SimpleBudget  time.Duration // -simple: budget of simple reads (SPEC R1)
	ComplexBudget time.Duration // -complex: budget of complex reads (SPEC R1)
	MaxRetries    int           // -retries: ReadRetryMaxCnt (SPEC R5), 1..retry.MaxMaxRetries
	WaitTimeout   time.Duration // -wait: the wait of requests without read retry
}

// FlagUsage holds the usage texts of the flags whose meaning a command
// words its own way (-seed's is the same everywhere).
type FlagUsage struct {
	Duration, Rate, Simple, Complex, Retries, Wait string
}

// Register defines the flags on fs, each storing into f, with rrsim's
// defaults: 2 s, 2000 requests/s, seed 1, budgets 300 ms and 600 ms, 2
// retries, a 1 s wait.
func (f *Flags) Register(fs *flag.FlagSet, u FlagUsage) {
	fs.DurationVar(&f.Duration, "duration", 2*time.Second, u.Duration)
	fs.IntVar(&f.Rate, "rate", 2000, u.Rate)
	fs.Uint64Var(&f.Seed, "seed", 1, "seed of the dataset, the workload and the faults")
	fs.DurationVar(&f.SimpleBudget, "simple", 300*time.Millisecond, u.Simple)
	fs.DurationVar(&f.ComplexBudget, "complex", 600*time.Millisecond, u.Complex)
	fs.IntVar(&f.MaxRetries, "retries", retry.DefaultMaxRetries, u.Retries)
	fs.DurationVar(&f.WaitTimeout, "wait", time.Second, u.Wait)
}

// Check returns an error naming the flag for a value the commands refuse:
// -retries outside 1..retry.MaxMaxRetries, or a -duration, -rate, -simple,
// -complex or -wait that is not positive (Run would take 0 for its
// default).
func (f *Flags) Check() error {
	if f.MaxRetries < 1 || f.MaxRetries > retry.MaxMaxRetries {
		return fmt.Errorf("-retries %d: want 1..%d", f.MaxRetries, retry.MaxMaxRetries)
	}
	if f.Duration <= 0 || f.Rate <= 0 || f.SimpleBudget <= 0 || f.ComplexBudget <= 0 || f.WaitTimeout <= 0 {
		return errors.New("-duration, -rate, -simple, -complex and -wait must be positive")
	}
	return nil
}

// Options returns the Options the flags set; every other field is zero.
func (f *Flags) Options() Options {
	return Options{Duration: f.Duration, Rate: f.Rate, Seed: f.Seed, SimpleBudget: f.SimpleBudget,
		ComplexBudget: f.ComplexBudget, MaxRetries: f.MaxRetries, WaitTimeout: f.WaitTimeout}
}
