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

// list returns every package of the repository's modules, sorted by path,
// as `go list` reports them.
func list(t *testing.T) []pkg {
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
	return rows
}

// short is a repository path without the module path; the root is "core".
func short(path string) string {
	if path == root {
		return "core"
	}
	return strings.TrimPrefix(path, root+"/")
}

// table lists every package of the repository's modules, the module it
// belongs to and the repository's packages it imports (tests excluded).
func table(t *testing.T) string {
	t.Helper()
	rows := list(t)
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

// TestReadmePackageMap: the README's package map names every package of
// every module exactly once, in a row whose module column is the module
// `go list` reports, so a package added or moved to a module of its own
// cannot be missing from the front page (issue 29).
func TestReadmePackageMap(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Package map\n")
	if !ok {
		t.Fatal("README.md has no \"## Package map\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	module := map[string]string{} // package → module column of its row
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| `") {
			continue
		}
		mod := strings.Trim(strings.TrimSpace(cells[2]), "`")
		for _, p := range strings.Split(cells[1], ",") {
			p = strings.Trim(strings.TrimSpace(p), "`")
			if _, dup := module[p]; dup {
				t.Errorf("README package map: %s listed twice", p)
			}
			module[p] = mod
		}
	}
	for _, p := range list(t) {
		name := short(p.ImportPath)
		if name == "core" {
			continue // the root holds no package
		}
		got, ok := module[name]
		switch {
		case !ok:
			t.Errorf("README package map: no row for %s", name)
		case p.Module == nil:
			t.Errorf("%s: go list reports no module", name)
		case got != short(p.Module.Path):
			t.Errorf("README package map: %s in module %q, go list says %q", name, got, short(p.Module.Path))
		}
		delete(module, name)
	}
	for name := range module {
		t.Errorf("README package map: %s is not a package of the repository", name)
	}
}
