package redisstore

import (
	"regexp"
	"testing"
)

// TestRedisScriptsOneKey pins what the package comment promises for Redis
// Cluster (issue 16): every Lua script names exactly one key, KEYS[1], so
// none can fail with CROSSSLOT; a script needing a second key must give
// both one hash tag, and this test must then change with it.
func TestRedisScriptsOneKey(t *testing.T) {
	keyRef := regexp.MustCompile(`KEYS\[(\d+)\]`)
	for name, src := range map[string]string{
		"complete": completeSrc,
		"release":  releaseSrc,
		"extend":   extendSrc,
	} {
		refs := keyRef.FindAllStringSubmatch(src, -1)
		if len(refs) == 0 {
			t.Errorf("%s script names no key", name)
		}
		for _, r := range refs {
			if r[1] != "1" {
				t.Errorf("%s script uses KEYS[%s]: a second key may live in another slot", name, r[1])
			}
		}
	}
}
