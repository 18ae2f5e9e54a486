package resptest_test

import (
	"fmt"

	"github.com/readretry/readretry/transport/resp/resptest"
)

// The data set is a model: a test checks every answer against it, never
// against another answer.
func ExampleData() {
	d := resptest.Data{Keys: 100, Lists: 10}
	fmt.Println(d.Key(7), d.Value(7) != "", d.Key(100), "is missing")
	fmt.Println(d.List(1), d.ListLen(1), d.List(5), d.ListLen(5), d.Elem(1, 0))
	// Output:
	// k:7 true k:100 is missing
	// l:1 128 l:5 0 e:1:0
}

// Three replicas with the same data, one of which goes dark for a while
// (SIGSTOP, then SIGCONT). Needs redis-server on PATH, so it is compiled
// but not run by go test.
func ExampleStartReplicas() {
	r, err := resptest.StartReplicas(3, resptest.Data{Keys: 1000, Lists: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Stop()
	_ = r.Servers[0].Freeze()
	// ... reads: replicas 1 and 2 answer ...
	_ = r.Servers[0].Thaw()
	v, _ := r.Servers[0].Do("GET", "k:7")
	fmt.Println(v == r.Data.Value(7))
}
