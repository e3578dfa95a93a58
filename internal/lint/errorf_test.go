package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestErrorfWrapsErrors type-checks every non-test Go file of the module
// and fails at each fmt.Errorf that formats a value of type error with a
// verb other than %w: the result would hide the error from errors.Is and
// errors.As. %w prints the same text as %v.
//
// An argument whose static type does not implement error (an any holding
// an error, err.Error()) is not seen; a call whose format is not a
// constant, or whose arguments are passed as a slice (args...), is not
// checked.
func TestErrorfWrapsErrors(t *testing.T) {
	root := moduleRoot(t)
	pkgs := goListExport(t, root, "-deps", "./...")
	lookup := exportLookup(pkgs)
	fset := token.NewFileSet()
	var bad []string
	checked, calls := 0, 0
	for _, p := range pkgs {
		if p.Module == nil || !p.Module.Main || p.Module.Path != "tofuc" || len(p.GoFiles)+len(p.CgoFiles) == 0 {
			continue
		}
		var files []*ast.File
		for _, name := range append(slices.Clone(p.GoFiles), p.CgoFiles...) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		// Generated files are type-checked with their package (its other
		// files may need their declarations) but not reported on.
		info, err := typeCheck(fset, p.ImportPath, files, p.lookup(lookup), len(p.CgoFiles) > 0, "go"+p.Module.GoVersion)
		if err != nil {
			t.Errorf("%s: %v", p.ImportPath, err)
			continue
		}
		checked++
		for _, f := range files {
			if ast.IsGenerated(f) {
				continue
			}
			n, found := errorfFindings(fset, f, info)
			calls += n
			for _, fd := range found {
				name := fd.pos.Filename
				if rel, err := filepath.Rel(root, name); err == nil {
					name = rel
				}
				bad = append(bad, fmt.Sprintf("%s:%d: fmt.Errorf formats error argument %d with %s", name, fd.pos.Line, fd.arg, fd.verb))
			}
		}
	}
	if checked == 0 || calls == 0 {
		t.Fatalf("checked %d packages and %d calls of fmt.Errorf: the check saw nothing", checked, calls)
	}
	t.Logf("checked %d calls of fmt.Errorf in %d packages", calls, checked)
	if len(bad) > 0 {
		t.Errorf("%d errors formatted without %%w (use %%w: it prints the same text and keeps the error for errors.Is and errors.As):\n%s",
			len(bad), strings.Join(bad, "\n"))
	}
}

// TestErrorfArgs checks the mapping of a format's verbs to the arguments
// they print, against fmt's own rules (width and precision stars consume
// arguments, %% none, [n] selects the n-th).
func TestErrorfArgs(t *testing.T) {
	for _, c := range []struct {
		format string
		nargs  int
		want   []use // star uses have verb "*"
	}{
		// nargs leaves no argument over unless an index is used (fmt
		// prints those too, after %!(EXTRA).
		{"plain", 0, nil},
		{"%v", 1, []use{{0, "%v"}}},
		{"%s: %v", 2, []use{{0, "%s"}, {1, "%v"}}},
		{"100%% %v", 1, []use{{0, "%v"}}},
		{"%-10s|%+v|%#v|% x|%08.3f", 5, []use{{0, "%-10s"}, {1, "%+v"}, {2, "%#v"}, {3, "% x"}, {4, "%08.3f"}}},
		{"%*d %v", 3, []use{{0, "*"}, {1, "%*d"}, {2, "%v"}}},
		{"%.*f %v", 3, []use{{0, "*"}, {1, "%.*f"}, {2, "%v"}}},
		{"%*.*f %w", 4, []use{{0, "*"}, {1, "*"}, {2, "%*.*f"}, {3, "%w"}}},
		{"%[2]v %[1]s", 2, []use{{1, "%[2]v"}, {0, "%[1]s"}}},
		{"%[2]v %v", 3, []use{{1, "%[2]v"}, {2, "%v"}}}, // continues after the index
		{"%[1]v %[1]w", 1, []use{{0, "%[1]v"}, {0, "%[1]w"}}},
		{"%[3]*.[2]*[1]f", 3, []use{{2, "*"}, {1, "*"}, {0, "%[3]*.[2]*[1]f"}}},
		{"%[3]v", 2, nil},                 // index out of range: %!v(BADINDEX)
		{"%[x]v %v", 2, []use{{0, "%v"}}}, // a malformed index: that verb prints nothing
		{"%v %v", 1, []use{{0, "%v"}}},    // %!v(MISSING)
		{"%[2]%%v", 2, []use{{1, "%v"}}},
		{"%", 0, nil},
		{"%v%", 1, []use{{0, "%v"}}},
		{"%ä %v", 2, []use{{0, "%ä"}, {1, "%v"}}},
	} {
		got := formatUses(c.format, c.nargs)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("formatUses(%q, %d) = %v, want %v", c.format, c.nargs, got, c.want)
		}
		// fmt itself prints the same arguments in the same order (it
		// reads a width or precision from an int only).
		var printed, mapped []int
		args := make([]any, c.nargs)
		for i := range args {
			args[i] = recorder{i, &printed}
		}
		_ = fmt.Errorf(c.format, args...)
		for _, u := range got {
			if u.verb != "*" {
				mapped = append(mapped, u.arg)
			}
		}
		if !slices.Equal(printed, mapped) {
			t.Errorf("fmt.Errorf(%q) with %d arguments prints arguments %v; formatUses says %v", c.format, c.nargs, printed, mapped)
		}
	}
}

// recorder is an argument of fmt.Errorf that records that it was printed.
type recorder struct {
	i       int
	printed *[]int
}

func (r recorder) Error() string { return "recorder" }

func (r recorder) Format(fmt.State, rune) { *r.printed = append(*r.printed, r.i) }

// snippet's calls that the check must report end in a comment "want N
// VERB"; no other call may be reported.
const snippet = `package p

import (
	"errors"
	"fmt"
	"os"
)

type valueErr struct{}

func (valueErr) Error() string { return "value" }

type ptrErr struct{}

func (*ptrErr) Error() string { return "pointer" }

func Errorf(format string, a ...any) error { return nil }

const prefix = "p: "

func calls(err error, name string, format string, args []any) []error {
	var held any = err
	pe := &os.PathError{Op: "open", Err: err}
	return []error{
		fmt.Errorf("%v", err), // want 1 %v
		fmt.Errorf("%s: %w", name, err),
		fmt.Errorf("%s: %s", name, err), // want 2 %s
		fmt.Errorf("%w and %v", err, errors.New("x")), // want 2 %v
		fmt.Errorf("%q", err), // want 1 %q
		fmt.Errorf("%[2]v: %[1]s", name, err), // want 2 %[2]v
		fmt.Errorf("%*d %v", 3, 4, err), // want 3 %v
		fmt.Errorf("100%% %w", err),
		fmt.Errorf(prefix+"%v", valueErr{}), // want 1 %v
		fmt.Errorf("%v", &ptrErr{}), // want 1 %v
		fmt.Errorf("%v", ptrErr{}),
		fmt.Errorf("%v", pe), // want 1 %v
		fmt.Errorf("%v", *pe),
		fmt.Errorf("%v", err.Error()),
		fmt.Errorf("%v", held),
		fmt.Errorf(format, err),
		fmt.Errorf("%v", args...),
		(fmt.Errorf)("%v", err), // want 1 %v
		Errorf("%v", err),
	}
}
`

// snippetRenamed imports fmt under another name.
const snippetRenamed = `package p

import f "fmt"

func g(err error) error {
	return f.Errorf("g: %v", err) // want 1 %v
}

func h[E error, A any](e E, a A) error {
	return f.Errorf("h: %v %v", a, e) // want 2 %v
}
`

// TestErrorfFindings runs the check on snippet and snippetRenamed.
func TestErrorfFindings(t *testing.T) {
	pkgs := goListExport(t, "", "fmt", "errors", "os")
	fset := token.NewFileSet()
	var files []*ast.File
	for i, src := range []string{snippet, snippetRenamed} {
		f, err := parser.ParseFile(fset, fmt.Sprintf("snippet%d.go", i), src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	lookup := exportLookup(pkgs)
	info, err := typeCheck(fset, "p", files, func(path string) (io.ReadCloser, error) { return lookup(path, path) }, false, "")
	if err != nil {
		t.Fatal(err)
	}
	wantRE := regexp.MustCompile(`// want (\d+) (\S+)`)
	var got, want []string
	for _, f := range files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if m := wantRE.FindStringSubmatch(c.Text); m != nil {
					p := fset.Position(c.Pos())
					want = append(want, fmt.Sprintf("%s:%d: %s %s", p.Filename, p.Line, m[1], m[2]))
				}
			}
		}
		n, found := errorfFindings(fset, f, info)
		if n == 0 {
			t.Errorf("%s: no call of fmt.Errorf seen", fset.Position(f.Pos()).Filename)
		}
		for _, fd := range found {
			got = append(got, fmt.Sprintf("%s:%d: %d %s", fd.pos.Filename, fd.pos.Line, fd.arg, fd.verb))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// listedPackage is what the checks read of `go list -json`'s output.
type listedPackage struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Module     *struct {
		Path      string
		Main      bool
		GoVersion string
	}
}

// moduleRoot is the folder of the go.mod above the test's working folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the working folder")
		}
		dir = up
	}
}

// goListExport runs `go list -export -json args` in dir (the working
// folder if empty), building what is not in the build cache, and returns
// the packages listed. It skips the test if go is not on PATH.
func goListExport(t *testing.T, dir string, args ...string) []*listedPackage {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	cmd := exec.Command(gobin, append([]string{"list", "-export", "-json"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export -json %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []*listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(listedPackage)
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// exportLookup opens the export data of a package, named by the import
// path of a package (not as written in an import declaration).
func exportLookup(pkgs []*listedPackage) func(written, path string) (io.ReadCloser, error) {
	export := map[string]string{}
	for _, p := range pkgs {
		export[p.ImportPath] = p.Export
	}
	return func(written, path string) (io.ReadCloser, error) {
		file := export[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %q (imported as %q)", path, written)
		}
		return os.Open(file)
	}
}

// lookup is the lookup function of p's importer: an import declaration's
// path is resolved through p's ImportMap (vendored packages).
func (p *listedPackage) lookup(open func(written, path string) (io.ReadCloser, error)) func(string) (io.ReadCloser, error) {
	return func(written string) (io.ReadCloser, error) {
		path := written
		if mapped, ok := p.ImportMap[written]; ok {
			path = mapped
		}
		return open(written, path)
	}
}

// typeCheck type-checks a package's files, importing from the export
// data lookup opens; fakeC accepts import "C" (cgo files). It returns the
// first type error.
func typeCheck(fset *token.FileSet, path string, files []*ast.File, lookup func(string) (io.ReadCloser, error), fakeC bool, goVersion string) (*types.Info, error) {
	conf := types.Config{
		Importer:    importer.ForCompiler(fset, "gc", lookup),
		FakeImportC: fakeC,
		GoVersion:   goVersion,
		Sizes:       types.SizesFor("gc", build.Default.GOARCH),
	}
	info := &types.Info{
		Types: map[ast.Expr]types.TypeAndValue{},
		Uses:  map[*ast.Ident]types.Object{},
	}
	if _, err := conf.Check(path, fset, files, info); err != nil {
		return nil, err
	}
	return info, nil
}

// finding is an error argument of fmt.Errorf printed without %w.
type finding struct {
	pos  token.Position // the call's
	arg  int            // 1 is the first argument after the format
	verb string         // as written: %v, %+v, %[2]s
}

// errorType is the interface error.
var errorType = types.Universe.Lookup("error").Type().Underlying().(*types.Interface)

// errorfFindings returns the number of calls of fmt.Errorf in f and those
// that print an argument of type error with a verb other than %w.
func errorfFindings(fset *token.FileSet, f *ast.File, info *types.Info) (calls int, found []finding) {
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isErrorf(call.Fun, info) {
			return true
		}
		calls++
		if len(call.Args) == 0 || call.Ellipsis.IsValid() {
			return true
		}
		tv := info.Types[call.Args[0]]
		if tv.Value == nil || tv.Value.Kind() != constant.String {
			return true
		}
		args := call.Args[1:]
		for _, u := range formatUses(constant.StringVal(tv.Value), len(args)) {
			if u.verb == "*" || strings.HasSuffix(u.verb, "w") {
				continue
			}
			if typ := info.TypeOf(args[u.arg]); typ != nil && types.Implements(typ, errorType) {
				found = append(found, finding{fset.Position(call.Pos()), u.arg + 1, u.verb})
			}
		}
		return true
	})
	return calls, found
}

// isErrorf reports whether fun, a call's function, is fmt.Errorf.
func isErrorf(fun ast.Expr, info *types.Info) bool {
	var id *ast.Ident
	switch e := ast.Unparen(fun).(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	default:
		return false
	}
	fn, ok := info.Uses[id].(*types.Func)
	return ok && fn.Pkg() != nil && fn.Pkg().Path() == "fmt" && fn.Name() == "Errorf"
}

// use is an argument a format prints: arg indexes the arguments after
// the format; verb is the directive as written, or "*" for an argument
// read as a width or precision.
type use struct {
	arg  int
	verb string
}

func (u use) String() string { return strconv.Itoa(u.arg) + ":" + u.verb }

// formatUses returns the arguments a format prints, in order, when
// given nargs arguments, following fmt's doPrintf: a directive that
// prints nothing (a bad or missing argument, %%) is left out.
func formatUses(format string, nargs int) []use {
	var uses []use
	argNum := 0
	for i := 0; i < len(format); {
		if format[i] != '%' {
			i++
			continue
		}
		start := i
		i++
		good := true
		// Flags.
		for i < len(format) && strings.IndexByte("#0+- ", format[i]) >= 0 {
			i++
		}
		// An explicit argument index, then the width.
		var afterIndex bool
		argNum, i, afterIndex, good = argNumber(format, i, argNum, nargs, good)
		if i < len(format) && format[i] == '*' {
			i++
			if argNum < nargs {
				uses = append(uses, use{argNum, "*"})
				argNum++
			}
			afterIndex = false
		} else {
			var present bool
			i, present, _ = parseNum(format, i)
			if afterIndex && present { // "%[3]2d"
				good = false
			}
		}
		// The precision.
		if i+1 < len(format) && format[i] == '.' {
			i++
			if afterIndex { // "%[3].2d"
				good = false
			}
			argNum, i, afterIndex, good = argNumber(format, i, argNum, nargs, good)
			if i < len(format) && format[i] == '*' {
				i++
				if argNum < nargs {
					uses = append(uses, use{argNum, "*"})
					argNum++
				}
				afterIndex = false
			} else {
				i, _, _ = parseNum(format, i)
			}
		}
		if !afterIndex {
			argNum, i, _, good = argNumber(format, i, argNum, nargs, good)
		}
		if i >= len(format) {
			break // %!(NOVERB)
		}
		verb, size := utf8.DecodeRuneInString(format[i:])
		i += size
		switch {
		case verb == '%': // prints a percent sign and consumes nothing
		case !good || argNum >= nargs: // %!v(BADINDEX), %!v(MISSING)
		default:
			uses = append(uses, use{argNum, format[start:i]})
			argNum++
		}
	}
	return uses
}

// argNumber reads an argument index "[n]" at format[i:] as fmt's
// argNumber does: it returns the argument to print next, where the format
// continues, whether an index was read and whether the directive is still
// good (a bad index prints nothing).
func argNumber(format string, i, argNum, nargs int, good bool) (int, int, bool, bool) {
	if i >= len(format) || format[i] != '[' {
		return argNum, i, false, good
	}
	// fmt's parseArgNumber: at least "[n]", n a decimal number.
	s := format[i:]
	width, ok := 1, false
	index := 0
	if len(s) >= 3 {
		if end := strings.IndexByte(s, ']'); end > 0 {
			j, present, n := parseNum(s[:end], 1)
			width = end + 1
			if present && j == end {
				index, ok = n-1, true
			}
		}
	}
	if ok && 0 <= index && index < nargs {
		return index, i + width, true, good
	}
	return argNum, i + width, ok, false
}

// parseNum reads a decimal number at s[i:] as fmt's parsenum does (a
// number too large ends the format); it returns where s continues, whether
// there was a number and its value.
func parseNum(s string, i int) (int, bool, int) {
	n, present := 0, false
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if n > 1e6 {
			return len(s), false, 0
		}
		n = n*10 + int(s[i]-'0')
		present = true
	}
	return i, present, n
}
