package check

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
	"tofuc/stdlib"
)

// Program holds the modules loaded in one run: each file given on the
// command line, the files they import, and the standard library.
type Program struct {
	parse   Parser
	modules map[string]*Module // by path
	loading map[string]bool    // import cycle detection
	prelude map[string]*lang.OpDecl
	cache   map[string]*ir.Instance
}

// Module is one .tdl file and the operators visible in it: its own, then
// those of the files it imports, then the standard library.
type Module struct {
	Path string
	File *lang.File
	Src  []byte
	// Origins, for a module imported from another format, say where its
	// models' statements came from, by the names they bind (joined with
	// ","): an ONNX model's nodes. The graph's nodes carry them
	// (ir.Node.Origin).
	Origins map[string]string
	prog    *Program
	scope   map[string]*lang.OpDecl
}

// StdPrefix marks import paths of the embedded standard library.
const StdPrefix = "std/"

// Parser turns a file's text into its syntax tree (tofuc/parser.Parse).
// A Program is given one, as go/types is given an Importer, so that
// checking depends on no front end.
type Parser func(filename string, src []byte) (*lang.File, error)

// NewProgram loads the standard library with parse, which the program
// parses every file with.
func NewProgram(parse Parser) (*Program, error) {
	p := &Program{parse: parse, modules: map[string]*Module{}, loading: map[string]bool{}, prelude: map[string]*lang.OpDecl{}, cache: map[string]*ir.Instance{}}
	var errs lang.ErrorList
	for _, f := range stdlib.Files() {
		file, err := parse(f.Name, f.Src)
		if err != nil {
			errs.Append(err)
			continue
		}
		m := &Module{Path: f.Name, File: file, Src: f.Src, prog: p}
		p.modules[f.Name] = m
		for _, op := range file.Ops {
			if prev := p.prelude[op.Name]; prev != nil {
				errs.Add(op.Pos, "operator %s is also defined at %s", op.Name, prev.Pos)
			}
			p.prelude[op.Name] = op
		}
	}
	for _, m := range p.modules {
		m.scope = p.prelude
	}
	return p, errs.Err()
}

// Program is the program the module was loaded into.
func (m *Module) Program() *Program { return m.prog }

// StdOps returns the standard library's operators by name.
func (p *Program) StdOps() map[string]*lang.OpDecl { return p.prelude }

// Sources are the paths and contents of the files loaded besides the
// standard library, sorted by path.
func (p *Program) Sources() (paths []string, srcs [][]byte) {
	for path := range p.modules {
		if !strings.HasPrefix(path, StdPrefix) {
			paths = append(paths, path)
		}
	}
	sort.Strings(paths)
	for _, path := range paths {
		srcs = append(srcs, p.modules[path].Src)
	}
	return paths, srcs
}

// Load reads, parses and resolves the imports of the file at path.
func (p *Program) Load(path string) (*Module, error) {
	if strings.HasPrefix(path, StdPrefix) {
		if m := p.modules[path]; m != nil {
			return m, nil
		}
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, lang.ErrorList{lang.Errorf(lang.Pos{File: path}, "cannot read: %v", unwrapPathError(err))}
	}
	return p.LoadSource(path, src)
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// LoadModel checks src, as the file at path, in a program of its own
// (parsed with parse) and returns its module and the graph of its only
// model with the attributes set (the tests' and tools' way to take a
// model from source).
func LoadModel(parse Parser, path string, src []byte, set map[string]ir.AttrValue) (*Module, *ir.Graph, error) {
	p, err := NewProgram(parse)
	if err != nil {
		return nil, nil, err
	}
	m, err := p.LoadSource(path, src)
	if err != nil {
		return nil, nil, err
	}
	g, err := m.Model("", set)
	return m, g, err
}

// LoadSource parses src as the file at path and resolves its imports.
func (p *Program) LoadSource(path string, src []byte) (*Module, error) {
	key := filepath.Clean(path)
	if m := p.modules[key]; m != nil {
		return m, nil
	}
	file, err := p.parse(path, src)
	if err != nil {
		return nil, err
	}
	m := &Module{Path: path, File: file, Src: src, prog: p}
	p.loading[key] = true
	defer delete(p.loading, key)
	var errs lang.ErrorList
	scope := map[string]*lang.OpDecl{}
	for name, op := range p.prelude {
		scope[name] = op
	}
	for _, imp := range file.Imports {
		dep, err := p.resolveImport(key, imp)
		if err != nil {
			errs.Append(err)
			continue
		}
		for _, op := range dep.File.Ops {
			scope[op.Name] = op
		}
	}
	local := map[string]*lang.OpDecl{}
	for _, op := range file.Ops {
		if prev := local[op.Name]; prev != nil {
			errs.Add(op.Pos, "operator %s is already defined at %s", op.Name, prev.Pos)
		}
		local[op.Name] = op
		scope[op.Name] = op
	}
	models := map[string]lang.Pos{}
	for _, md := range file.Models {
		if prev, ok := models[md.Name]; ok {
			errs.Add(md.Pos, "model %s is already defined at %s", md.Name, prev)
		}
		models[md.Name] = md.Pos
	}
	m.scope = scope
	if err := errs.Err(); err != nil {
		return nil, err
	}
	p.modules[key] = m
	return m, nil
}

func (p *Program) resolveImport(from string, imp *lang.Import) (*Module, error) {
	if strings.HasPrefix(imp.Path, StdPrefix) {
		if m := p.modules[imp.Path]; m != nil {
			return m, nil
		}
		return nil, lang.ErrorList{lang.Errorf(imp.Pos, "no standard library file %s%s", imp.Path, suggest.DidYouMean(imp.Path, p.stdNames()))}
	}
	path := imp.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(from), path)
	}
	key := filepath.Clean(path)
	if p.loading[key] {
		return nil, lang.ErrorList{lang.Errorf(imp.Pos, "import cycle: %s imports itself", imp.Path)}
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, lang.ErrorList{lang.Errorf(imp.Pos, "cannot import %q: %v", imp.Path, unwrapPathError(err))}
	}
	return p.LoadSource(path, src)
}

func (p *Program) stdNames() []string {
	var out []string
	for n := range p.modules {
		if strings.HasPrefix(n, StdPrefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Op returns the operator visible under name in m, or nil.
func (m *Module) Op(name string) *lang.OpDecl { return m.scope[name] }

// OpNames lists the operators visible in m.
func (m *Module) OpNames() []string {
	out := make([]string, 0, len(m.scope))
	for n := range m.scope {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Instantiate instantiates decl for inputs of the given types, like
// the package's Instantiate, through the program-wide cache (an importer
// instantiates the same few operators thousands of times).
func (p *Program) Instantiate(decl *lang.OpDecl, attrs map[string]ir.AttrValue, inputs []TensorType, site lang.Pos) (*ir.Instance, error) {
	args := map[string]cval{}
	for k, v := range attrs {
		args[k] = fromAttr(v)
	}
	var errs lang.ErrorList
	inst := p.instance(decl, args, nil, inputs, site, &errs)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return inst, nil
}

// instance instantiates through the program-wide cache.
func (p *Program) instance(decl *lang.OpDecl, attrs map[string]cval, attrPos map[string]lang.Pos, inputs []TensorType, site lang.Pos, errs *lang.ErrorList) *ir.Instance {
	key := instanceKey(decl, attrs, inputs)
	if inst, ok := p.cache[key]; ok {
		return inst
	}
	inst := instantiate(decl, attrs, attrPos, inputs, site, errs)
	if inst != nil {
		p.cache[key] = inst
	}
	return inst
}

func instanceKey(decl *lang.OpDecl, attrs map[string]cval, inputs []TensorType) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s<", decl.Name, decl.Pos)
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%s:%s,", n, attrs[n].kind, attrs[n])
	}
	b.WriteString(">(")
	for _, in := range inputs {
		b.WriteString(in.String())
		b.WriteString(",")
	}
	return b.String()
}

// Check checks every operator of the file on its own (symbolic shapes,
// default attributes), every model with its default attributes (set
// overrides them for the model named model, or for the only one), and every
// rule.
func (m *Module) Check(model string, set map[string]ir.AttrValue) error {
	var errs lang.ErrorList
	for _, op := range m.File.Ops {
		checkOp(op, &errs)
	}
	if model != "" {
		if _, err := m.findModel(model); err != nil {
			errs.Append(err)
		}
	} else if len(set) > 0 && len(m.File.Models) != 1 {
		errs.Add(lang.Pos{File: m.Path}, "attribute overrides need one model, but the file defines %d; choose one with --model", len(m.File.Models))
	}
	for _, md := range m.File.Models {
		var over map[string]ir.AttrValue
		if md.Name == model || (model == "" && len(m.File.Models) == 1) {
			over = set
		}
		if _, err := m.elaborate(md, over, ""); err != nil {
			errs.Append(err)
		}
	}
	for _, r := range m.File.Rules {
		if _, err := m.Rule(r.Name); err != nil {
			errs.Append(err)
		}
	}
	return errs.Err()
}

// Model elaborates the model called name (or the only one, when name is
// empty) with attribute overrides.
func (m *Module) Model(name string, set map[string]ir.AttrValue) (*ir.Graph, error) {
	md, err := m.findModel(name)
	if err != nil {
		return nil, err
	}
	return m.elaborate(md, set, "")
}

// SymbolicModel elaborates the model called name as Model does, except
// that the integer attribute or input extent symbol stays the shape
// symbol of that name (a dynamic batch: analysis/batchdim). A model that
// needs the symbol's value (a condition, a float, a shape it cannot carry
// symbolically) is an error naming the statement.
func (m *Module) SymbolicModel(name string, set map[string]ir.AttrValue, symbol string) (*ir.Graph, error) {
	md, err := m.findModel(name)
	if err != nil {
		return nil, err
	}
	return m.elaborate(md, set, symbol)
}

func (m *Module) findModel(name string) (*lang.ModelDecl, error) {
	var names []string
	for _, md := range m.File.Models {
		if md.Name == name || (name == "" && len(m.File.Models) == 1) {
			return md, nil
		}
		names = append(names, md.Name)
	}
	switch {
	case name != "":
		return nil, lang.ErrorList{lang.Errorf(lang.Pos{File: m.Path}, "no model %s%s", name, suggest.DidYouMean(name, names))}
	case len(names) == 0:
		return nil, lang.ErrorList{lang.Errorf(lang.Pos{File: m.Path}, "the file defines no model")}
	}
	return nil, lang.ErrorList{lang.Errorf(lang.Pos{File: m.Path}, "the file defines %d models (%s); choose one with --model", len(names), strings.Join(names, ", "))}
}
