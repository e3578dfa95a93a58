package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLayers checks the module's imports against the layering table of
// docs/architecture.md: every package of the module is placed by the
// table, and none imports a package of a layer above its own (tests are
// not checked: they may import anything).
func TestLayers(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := parseLayers(doc)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	imports := goListImports(t, root)
	problems := table.check(imports)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d packages in %d layers", len(imports), len(table))
}

// TestLayersCheck: the check finds an import up the layers and a
// package the table does not place, and accepts imports down or across.
func TestLayersCheck(t *testing.T) {
	table, err := parseLayers([]byte(`
## Layers

| layer | name | packages | what |
|---|---|---|---|
| 1 | language | ` + "`lang`, `lang/...`" + ` | x |
| 4 | analysis | ` + "`analysis/...`" + ` | x |
| 6 | front ends | ` + "`parser`, `frontend/...`" + ` | x |
| 2 | formats | ` + "`frontend/onnx/onnxpb`" + ` | x |
`))
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string][]string{
		"tofuc/lang/ir":               {"tofuc/lang"},
		"tofuc/analysis/check":        {"tofuc/lang", "tofuc/lang/ir", "tofuc/analysis/interval", "tofuc/parser"},
		"tofuc/analysis/interval":     {"tofuc/lang"},
		"tofuc/parser":                {"tofuc/lang"},
		"tofuc/frontend/onnx":         {"tofuc/parser", "tofuc/frontend/onnx/onnxpb", "tofuc/analysis/check"},
		"tofuc/frontend/onnx/onnxpb":  {"tofuc/frontend/onnx"},
		"tofuc/somewhere/else":        nil,
		"tofuc/lang":                  nil,
		"github.com/some/dependency":  nil,
		"tofuc/analysis/check/shared": {"github.com/some/dependency"},
	}
	got := table.check(imports)
	want := []string{
		"tofuc/analysis/check (layer 4, analysis) imports tofuc/parser (layer 6, front ends)",
		"tofuc/frontend/onnx/onnxpb (layer 2, formats) imports tofuc/frontend/onnx (layer 6, front ends)",
		"tofuc/somewhere/else is in no layer of docs/architecture.md's table",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// layer is a row of the table.
type layer struct {
	rank     int
	name     string
	patterns []string
}

type layers []layer

var (
	layerRow    = regexp.MustCompile(`^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|([^|]*)\|`)
	codePattern = regexp.MustCompile("`([^`]+)`")
)

// parseLayers reads the table under the "## Layers" heading.
func parseLayers(doc []byte) (layers, error) {
	_, after, ok := bytes.Cut(doc, []byte("\n## Layers\n"))
	if !ok {
		return nil, fmt.Errorf("no section \"## Layers\"")
	}
	var out layers
	for _, line := range strings.Split(string(after), "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		m := layerRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rank, _ := strconv.Atoi(m[1])
		l := layer{rank: rank, name: m[2]}
		for _, p := range codePattern.FindAllStringSubmatch(m[3], -1) {
			l.patterns = append(l.patterns, p[1])
		}
		if len(l.patterns) == 0 {
			return nil, fmt.Errorf("layer %d names no packages", rank)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rows in the layers table")
	}
	return out, nil
}

// place returns the layer of a package of the module (its path without
// "tofuc/"): that of the longest pattern matching it.
func (ls layers) place(pkg string) (layer, bool) {
	best, length, found := layer{}, -1, false
	for _, l := range ls {
		for _, p := range l.patterns {
			base, tree := strings.CutSuffix(p, "/...")
			if pkg == base || tree && strings.HasPrefix(pkg, base+"/") {
				if len(base) > length {
					best, length, found = l, len(base), true
				}
			}
		}
	}
	return best, found
}

// check lists the imports that run up the layers, and the packages of
// the module in none, in order.
func (ls layers) check(imports map[string][]string) []string {
	var out []string
	var pkgs []string
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	const module = "tofuc/"
	for _, p := range pkgs {
		rel, ours := strings.CutPrefix(p, module)
		if !ours {
			continue
		}
		from, ok := ls.place(rel)
		if !ok {
			out = append(out, p+" is in no layer of docs/architecture.md's table")
			continue
		}
		deps := slices.Clone(imports[p])
		slices.Sort(deps)
		for _, d := range deps {
			drel, ours := strings.CutPrefix(d, module)
			if !ours {
				continue
			}
			if to, ok := ls.place(drel); ok && to.rank > from.rank {
				out = append(out, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s)", p, from.rank, from.name, d, to.rank, to.name))
			}
		}
	}
	return out
}

// goListImports maps every package of the module to its (non-test)
// imports.
func goListImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	cmd := exec.Command(gobin, "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./...: %v\n%s", err, stderr.Bytes())
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath] = p.Imports
	}
	if len(imports) == 0 {
		t.Fatal("go list found no packages")
	}
	return imports
}
