package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/sqlstore"
	"github.com/readretry/readretry/idem/sqlstore/internal/sqltest"
)

// lostClaimReply is the go-redis#2556 kind on a database: the claim's
// INSERT commits, its reply is lost (a proxy drops it), and the caller's
// context ends. The row stayed, so every retry was "in progress" for the
// pending ttl while nothing ran, and the error did not wrap the context's.
// Claim now deletes the row by its fence on a fresh connection: a retry
// claims at once, and the error wraps context.DeadlineExceeded.
func lostClaimReply(t *testing.T, s *sqltest.Server, d sqlstore.Dialect) {
	ctx := context.Background()
	p := sqltest.StartProxy(t, s.Addr())
	db := s.OpenVia(t, 1, p.Addr())
	st := storeOn(t, db, d.Name, sqlstore.Config{})
	if f, err := st.Claim(ctx, []byte("warm"), time.Minute); err != nil || f == 0 { // one open connection
		t.Fatal(f, err)
	}
	p.Stall()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	f, err := st.Claim(cctx, []byte("lost"), time.Minute)
	cancel()
	if f != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim whose reply was lost = %v, %v; want 0 and an error wrapping context.DeadlineExceeded", f, err)
	}
	f, err = st.Claim(ctx, []byte("lost"), time.Minute)
	if err != nil || f == 0 {
		state, _, _ := st.Lookup(ctx, []byte("lost"), nil)
		t.Fatalf("retry after the lost reply = %v, %v (key %v); want a claim", f, err, state)
	}
	if state, _, _ := st.Lookup(ctx, []byte("warm"), nil); state != idem.Pending {
		t.Fatalf("another claim is %v after the cleanup, want pending", state)
	}
}

func TestPostgresLostClaimReply(t *testing.T) {
	lostClaimReply(t, sqltest.Postgres(t), sqlstore.Postgres)
}

func TestMariaDBLostClaimReply(t *testing.T) {
	lostClaimReply(t, sqltest.MariaDB(t), sqlstore.MySQL)
}
