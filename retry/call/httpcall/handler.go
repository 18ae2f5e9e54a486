package httpcall

import (
	"net/http"

	"github.com/readretry/readretry/retry/call"
)

// Handler is the server side of SPEC B5 for net/http: it reads the flags of
// each incoming request from its headers (call.Extract) into the request's
// context, where the policies of the calls the handler makes find them.
// Install it on every service that makes retried calls. It allocates what
// http.Request.WithContext and the flags' context value cost, per request.
//
// Trust boundary: the headers are believed as sent (see call.Extract for
// what a caller can switch with them). Install it without options only
// behind the edge, where every caller is a service of the same system; on a
// service that outsiders reach, install Handler(next, call.Edge()), which
// ignores their X-Retry-* headers and makes each request the entrance.
func Handler(next http.Handler, opts ...call.ServerOption) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(call.Extract(r.Context(), r.Header, opts...)))
	})
}
