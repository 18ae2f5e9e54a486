package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the import table of docs/design.md")

const (
	root  = "github.com/readretry/readretry"
	begin = "<!-- import table: go test ./internal/layout -update -->"
	end   = "<!-- end of import table -->"
)

// pkg is the part of `go list -json` the table needs.
type pkg struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// table lists every package of the repository's modules, the module it
// belongs to and the repository's packages it imports (tests excluded).
func table(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", root+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var rows []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, p)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ImportPath < rows[j].ImportPath })
	short := func(path string) string {
		if path == root {
			return "core"
		}
		return strings.TrimPrefix(path, root+"/")
	}
	var b strings.Builder
	b.WriteString("| package | module | imports of the repository |\n| --- | --- | --- |\n")
	for _, p := range rows {
		var imps []string
		for _, imp := range p.Imports {
			if imp == root || strings.HasPrefix(imp, root+"/") {
				imps = append(imps, "`"+short(imp)+"`")
			}
		}
		list := "nothing"
		if len(imps) > 0 {
			list = strings.Join(imps, ", ")
		}
		mod := "?"
		if p.Module != nil {
			mod = "`" + short(p.Module.Path) + "`"
		}
		b.WriteString("| `" + short(p.ImportPath) + "` | " + mod + " | " + list + " |\n")
	}
	return b.String()
}

// TestDesignImportTable fails when docs/design.md's import table is not
// what `go list` reports; -update rewrites it.
func TestDesignImportTable(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	path := filepath.Join("..", "..", "docs", "design.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q markers", path, begin, end)
	}
	want := table(t)
	got := s[i+len(begin)+1 : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(s[:i+len(begin)+1]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/design.md's import table is stale; run go test ./internal/layout -update\ngot:\n%s\nwant:\n%s", got, want)
}
