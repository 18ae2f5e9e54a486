package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the repository's root, from this package's directory.
const root = "../.."

// maxReadme is the README's size limit in bytes: issue 29 wants a front
// door of about 10 KB, every figure and run output in BENCHMARKS.md.
const maxReadme = 12 * 1024

// snippetFiles are the files whose README:begin … README:end regions are
// the README's go blocks. The toolkit's snippet lives with grpccall because
// it needs grpc-go, which the core module does not require.
var snippetFiles = []string{
	"internal/readme/snippets_test.go",
	"retry/call/grpccall/readme_test.go",
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goBlocks returns the bodies of the ```go fences of a Markdown text.
func goBlocks(md string) []string {
	var blocks []string
	for _, part := range strings.Split(md, "\n```go\n")[1:] {
		end := strings.Index(part, "\n```")
		if end < 0 {
			end = len(part)
		}
		blocks = append(blocks, part[:end+1])
	}
	return blocks
}

// regions returns the snippets of a Go source: the lines strictly between
// a "// README:begin" line and the next "// README:end" line, each with
// one leading tab removed (the snippets sit in a function body).
func regions(src string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.SplitAfter(src, "\n") {
		switch strings.TrimSpace(line) {
		case "// README:begin":
			in, cur = true, nil
			continue
		case "// README:end":
			if in {
				out = append(out, strings.Join(cur, ""))
			}
			in = false
			continue
		}
		if in {
			cur = append(cur, strings.TrimPrefix(line, "\t"))
		}
	}
	return out
}

// TestReadmeSnippets: every ```go block of README.md is, byte for byte, a
// snippet that a test compiles, and every snippet is shown in the README,
// so a README example cannot drift from code that builds.
func TestReadmeSnippets(t *testing.T) {
	blocks := goBlocks(read(t, "README.md"))
	if len(blocks) == 0 {
		t.Fatal("README.md has no go block")
	}
	snippets := map[string]string{} // text → file
	for _, f := range snippetFiles {
		rs := regions(read(t, f))
		if len(rs) == 0 {
			t.Errorf("%s: no README:begin … README:end region", f)
		}
		for _, r := range rs {
			snippets[r] = f
		}
	}
	shown := map[string]bool{}
	for i, b := range blocks {
		if _, ok := snippets[b]; !ok {
			t.Errorf("README.md go block %d is not a compiled snippet of %v (edit the snippet and copy it):\n%s", i+1, snippetFiles, b)
		}
		shown[b] = true
	}
	for s, f := range snippets {
		if !shown[s] {
			t.Errorf("%s: snippet not shown in README.md:\n%s", f, s)
		}
	}
}

// TestReadmeSize: the README stays a front door.
func TestReadmeSize(t *testing.T) {
	if n := len(read(t, "README.md")); n > maxReadme {
		t.Errorf("README.md is %d bytes, over %d: figures and run output go to BENCHMARKS.md, details to docs/", n, maxReadme)
	}
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	refLink    = regexp.MustCompile(`(?m)^\s*\[[^\]]+\]:\s*(\S+)`)
	autoLink   = regexp.MustCompile(`<([a-z][a-z0-9+.-]*:[^>\s]*)>`)
	heading    = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// links returns the link targets of a Markdown text.
func links(md string) []string {
	var out []string
	for _, re := range []*regexp.Regexp{inlineLink, refLink, autoLink} {
		for _, m := range re.FindAllStringSubmatch(md, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchor is GitHub's anchor of a heading: lower case, punctuation dropped,
// spaces to hyphens.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f && r != '·' && r != '—' && r != '–' && r != '×':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks fails on a link that leaves the repository or names a file or
// heading that does not exist. from is the Markdown file's repository path.
func checkLinks(t *testing.T, from string) {
	t.Helper()
	md := read(t, from)
	for _, l := range []string{"http://", "https://", "../shared"} {
		if strings.Contains(md, l) {
			t.Errorf("%s: %q: no link or address outside the repository", from, l)
		}
	}
	for _, target := range links(md) {
		if strings.Contains(target, ":") {
			t.Errorf("%s: link %q leaves the repository", from, target)
			continue
		}
		file, frag, _ := strings.Cut(target, "#")
		path := from
		if file != "" {
			path = filepath.ToSlash(filepath.Join(filepath.Dir(from), file))
			if path == ".." || strings.HasPrefix(path, "../") {
				t.Errorf("%s: link %q leaves the repository", from, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, path)); err != nil {
				t.Errorf("%s: link %q: %v", from, target, err)
				continue
			}
		}
		if frag == "" || !strings.HasSuffix(path, ".md") {
			continue
		}
		found := false
		for _, h := range heading.FindAllStringSubmatch(read(t, path), -1) {
			if anchor(strings.Trim(h[1], " #")) == frag {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: link %q: no such heading in %s", from, target, path)
		}
	}
}

// TestReadmeLinks: the README links only into the repository (the install
// line's module path is a command, not a link), every link resolves, and
// so do BENCHMARKS.md's.
func TestReadmeLinks(t *testing.T) {
	checkLinks(t, "README.md")
	checkLinks(t, "BENCHMARKS.md")
}

// TestBenchmarksRefreshMarkers: every section of BENCHMARKS.md that holds
// figures says which command they come from, so that the figures can be
// refreshed from one run.
func TestBenchmarksRefreshMarkers(t *testing.T) {
	md := read(t, "BENCHMARKS.md")
	sections := regexp.MustCompile(`(?m)^#{2,3} `).Split(md, -1)[1:]
	if len(sections) < 10 {
		t.Fatalf("BENCHMARKS.md has %d sections; want the rrsim, rrcompare and micro-benchmark ones", len(sections))
	}
	for _, s := range sections {
		title, _, _ := strings.Cut(s, "\n")
		if !strings.Contains(s, "<!-- refresh: ") {
			t.Errorf("BENCHMARKS.md section %q has no <!-- refresh: COMMAND --> marker", title)
		}
		if !strings.Contains(s, "2-core VM") {
			t.Errorf("BENCHMARKS.md section %q does not name its machine (2-core VM)", title)
		}
	}
}

// TestAsyncSnippetRuns runs the README's asynchronous snippet against an
// in-memory proxy: Send goes out, the poll loop hands the answer back, and
// nothing stays in flight. (The blocking snippet dials the addresses it
// names, so it is compiled only.)
func TestAsyncSnippetRuns(t *testing.T) {
	tr := retrytest.NewTransport()
	tr.SetDefaultHandler(retrytest.Serve(retrytest.Data{}, 1))
	c, err := retry.New(retry.Config{Transport: tr, Poller: retry.PollHand})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	zone := retry.Zone{AppID: 2, ZoneID: 3}
	if err := c.ApplyRoute(zone, []retry.Proxy{{Host: "10.0.0.1", Port: 9000}},
		"conf://ReadRetryCmd=7&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadRetryTimeout(time.Second, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := readmeAsync(c, zone, []byte("k"), []byte("ctx")); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.InFlight(zone); n != 0 {
		t.Errorf("after the poll loop %d requests in flight, want 0", n)
	}
	if s, err := c.Stats(zone); err != nil || s.ReadsSent != 1 {
		t.Errorf("reads sent %d (%v), want 1", s.ReadsSent, err)
	}
}

var _ = readmeDo // compiled by go vet and go test; see TestAsyncSnippetRuns
