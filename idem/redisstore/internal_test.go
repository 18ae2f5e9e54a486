package redisstore

import (
	"regexp"
	"strings"
	"testing"

	"github.com/readretry/readretry/idem"
)

// hashTag returns what Redis Cluster hashes of name: the text between the
// first '{' and the first '}' after it, when that is not empty; else the
// whole name.
func hashTag(name string) string {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '}'); j > 0 {
			return name[i+1 : i+1+j]
		}
	}
	return name
}

// TestScriptKeysShareASlot pins what the package comment promises for
// Redis Cluster: a script names at most three keys — the entry and its
// scope's ledger — and they carry one hash tag, so no script can fail with
// CROSSSLOT; and the tag comes from the scope (or, without one, from a hash
// of the whole key), never from braces in the client's key (S15).
func TestScriptKeysShareASlot(t *testing.T) {
	keyRef := regexp.MustCompile(`KEYS\[(\d+)\]`)
	for name, src := range map[string]string{
		"claim": claimSrc, "complete": completeSrc, "release": releaseSrc,
		"abandon": abandonSrc, "extend": extendSrc, "consume": consumeSrc,
	} {
		for _, r := range keyRef.FindAllStringSubmatch(src, -1) {
			if r[1] != "1" && r[1] != "2" && r[1] != "3" {
				t.Errorf("%s script uses KEYS[%s]", name, r[1])
			}
		}
	}
	s := &Store{prefix: "idem:", quota: 10}
	scoped := func(scope, key string) []byte {
		k, err := idem.ScopedKey(nil, scope, key)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tags := map[string]bool{}
	for _, k := range [][]byte{scoped("alice", "{pin}-1"), scoped("alice", "x}{y"), scoped("alice", "{}")} {
		for _, ns := range []byte{'c', 't'} {
			e := s.entryOf(ns, k)
			if len(e.keys) != 3 {
				t.Fatalf("scoped key %q has keys %q, want the entry and the ledger's two", k, e.keys)
			}
			for _, name := range e.keys {
				tags[hashTag(name)] = true
			}
		}
	}
	if len(tags) != 1 {
		t.Fatalf("one scope's entries and ledger carry tags %v, want one", tags)
	}
	// Without a scope (or with the empty one), the client's braces choose
	// nothing: "{pin}-1" and "{pin}-2" get different tags.
	for _, pair := range [][2][]byte{
		{[]byte("{pin}-1"), []byte("{pin}-2")},
		{scoped("", "{pin}-1"), scoped("", "{pin}-2")},
	} {
		a, b := s.entryOf('c', pair[0]), s.entryOf('c', pair[1])
		if len(a.keys) != 1 || hashTag(a.keys[0]) == hashTag(b.keys[0]) || hashTag(a.keys[0]) == "pin" {
			t.Fatalf("%q and %q: keys %q and %q; want one key each, different tags, not the client's", pair[0], pair[1], a.keys, b.keys)
		}
	}
}
