module github.com/readretry/readretry/bench

go 1.26

replace github.com/readretry/readretry => ../

require github.com/readretry/readretry v0.0.0-00010101000000-000000000000

require (
	github.com/RussellLuo/timingwheel v0.0.0-20220218152713-54845bda3108 // indirect
	github.com/avast/retry-go/v4 v4.7.0 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/failsafe-go/failsafe-go v0.9.8 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
)
