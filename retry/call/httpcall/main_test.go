package httpcall

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/readretry/readretry/retry/call"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustPolicy(t testing.TB, opts ...call.Option) *call.Policy {
	t.Helper()
	p, err := call.NewPolicy(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
