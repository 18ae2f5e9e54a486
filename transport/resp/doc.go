// Package resp is a retry.Transport that speaks RESP2, Redis's protocol,
// to a set of redis-server replicas: the engine's hedged, exactly-once
// reads over a database this project did not write (SPEC R23). It is also
// the worked example of docs/adapting.md: how an SDK's own protocol meets
// the engine's frames.
//
// # Mapping
//
// The engine hands Send a wire request frame and expects wire response
// frames from Recv. This transport turns each request into RESP commands on
// the chosen replica's connection and each reply into one response packet:
//
//	engine request (wire)             Redis command(s)                 response packet(s)
//	--------------------------------  -------------------------------  -----------------------------------------------
//	7 GET key                         GET key                          1 packet: record (0, key, value);
//	  (simple read, SPEC R6)                                           nil bulk → code ResultNotFound, no record
//	23 BATCH_GET k0…kn-1              MGET of BatchChunk keys at a     1 packet per chunk, HaveMore on all but the
//	  (batch read, SPEC R10, R11)     time, all chunks pipelined       last; record (index, key, value) per key, a
//	                                                                   nil element → record code ResultNotFound
//	  partial re-send (R11)           MGET of the keys not answered    records keep their original indexes
//	11 LIST_GETALL key pos limit      LRANGE key p p+RangeChunk-1,     1 packet per chunk, record (position, key,
//	  (index read, SPEC R10, R11)     the next chunk asked when a      element); cursor = position after it; a short
//	                                  full one arrives                 chunk (or the limit) is the last packet
//	  resume (R11)                    LRANGE from the first position   positions continue where accepted ones end
//	                                  not accepted
//	error reply LOADING, BUSY,        —                                packet code Config.RetryCode: a listed code,
//	  MASTERDOWN, TRYAGAIN                                             so the engine re-sends at once (SPEC R8)
//	other error reply                 —                                packet code ResultReplicaError: ends the read
//	connection lost with commands     —                                none: the engine's timers re-send; with
//	  pending (reset, closed, bad                                      Config.AnswerLost, 1 packet per request
//	  reply)                                                           attempt pending, code Config.RetryCode, no
//	                                                                   record: the engine re-sends at once
//	writes 1, 3, 5, 9                 none: Send returns               an SDK sends writes to the master with its
//	                                  ErrWriteRefused                  ordinary client (idempotent via package idem)
//	other reads (103, 15, 117,        none: Send returns ErrUnsupported
//	  153, 25)
//
// A missing key is an answer, not a failure: GET's nil bulk is delivered
// with ResultNotFound and never retried (the code is not listed). An
// LRANGE of a missing list is an empty array: an empty last packet whose
// cursor ends the stream where it began.
//
// LRANGE chunks are read one after the other (the next chunk is asked for
// when a full one arrives), so a list that changes during a read may be
// seen at different moments by different chunks; the engine's guarantee
// is about positions: each position once, in order.
//
// # Sequence matching
//
// RESP carries no request identifiers: Redis answers one connection's
// commands in the order it received them. Each connection therefore keeps
// a queue of pending commands (sequence number, async ID, attempt, packet
// index, and what the reply must look like), pushed in the order the
// commands are written and popped as replies arrive; the reply at the head
// of the stream answers the entry at the head of the queue. A connection
// that breaks loses its queue, and the engine's timers re-send what read
// retry covers, as over transport/tcp. With Config.AnswerLost it answers
// what its queue still holds with Config.RetryCode instead
// (Stats.LostAnswers), so the engine re-sends those reads to another
// replica at once: a listed code re-sends only while retries remain, and
// is held, then delivered at the budget's end, when none do (SPEC R8).
//
// # Shape
//
// The transport is transport/tcp with a translating connection: tcp's
// reconnection with backoff, receive rings, write batching, availability
// and Wait are used as they are, and the net.Conn tcp dials is a codec
// whose Write turns the length-prefixed request frames tcp's writer hands
// over into RESP commands (one system call per batch), and whose Read
// decodes RESP replies into length-prefixed response frames for tcp's
// reader. One pipelined connection per replica; no goroutine per request;
// 0 allocations per request at steady state (TestAllocs).
//
// # Bad input
//
// The decoder checks every length before it trusts it and waits for at
// most Config.MaxReply bytes per reply. A replica that sends bytes that
// are not RESP2, a bulk or array longer than MaxReply, or a reply that does
// not fit its command (an array for GET, an MGET answer with another
// count, an LRANGE answer longer than asked, a status or integer reply, a
// reply with nothing pending) has its connection dropped and counted
// (Stats.ProtocolErrors); frames decoded before the bad reply are
// delivered, nothing of it is (the requests still pending are lost as on
// any broken connection), and tcp reconnects with backoff. The decoder
// never panics (FuzzDecode).
package resp
