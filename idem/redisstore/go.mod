module github.com/readretry/readretry/idem/redisstore

go 1.26.0

replace github.com/readretry/readretry => ../..

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/readretry/readretry v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
