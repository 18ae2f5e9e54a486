module github.com/readretry/readretry/bench

go 1.26.0

replace github.com/readretry/readretry => ../

require (
	github.com/RussellLuo/timingwheel v0.0.0-20220218152713-54845bda3108
	github.com/avast/retry-go/v4 v4.7.0
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/readretry/readretry v0.0.0-00010101000000-000000000000
	github.com/sethvargo/go-retry v0.5.0
	github.com/valyala/bytebufferpool v1.0.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect
