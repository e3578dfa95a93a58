// Package planio reads the inputs and parameters of a compiled plan
// from NumPy files and writes its outputs: what `tofuc run` and
// `tofuc-run` share. Tensors are `.npy` files (bf16 ones stored as f32,
// as NumPy has no bf16), parameters one `.npz`; an output's file is its
// name with '/' and ':' made '_' (FileName).
package planio

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/safefile"
	"tofuc/runtime/tensor"
)

// Read reads the plan compiled into dir and calls load with it, holding
// a shared lock on dir (the lock a compile's commit takes exclusively):
// what load reads of dir, the plan's files and parameters, is of the
// same compile as the plan.
func Read(dir string, load func(p *plan.Plan) error) (*plan.Plan, error) {
	unlock, err := safefile.Lock(dir, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	p, err := plan.Read(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, err
	}
	return p, load(p)
}

// Specs parses repeated NAME=PATH.npy flags (--in).
func Specs(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range flags {
		name, path, ok := strings.Cut(s, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--in %q: expected NAME=PATH.npy", s)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--in %s given twice", name)
		}
		out[name] = path
	}
	return out, nil
}

// Inputs reads every input of plan p from the file specs names for it,
// its header checked against the input's binding before its data is
// read; an input without one is draw's (nil: an error naming the flag to
// give). A file for no input of the plan is an error.
func Inputs(p *plan.Plan, specs map[string]string, draw func(b plan.Binding) (*tensor.Tensor, error)) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for _, b := range p.Inputs {
		path, ok := specs[b.Name]
		if !ok {
			if draw == nil {
				return nil, fmt.Errorf("input %s (%s%v) is missing: give it with --in %s=PATH.npy", b.Name, b.DType, b.Shape, b.Name)
			}
			t, err := draw(b)
			if err != nil {
				return nil, err
			}
			out[b.Name] = t
			continue
		}
		t, err := npy.ReadFileVetted(path, func(_ string, dt lang.DType, shape []int) error { return fits(b, dt, shape, "input") })
		if err != nil {
			return nil, fmt.Errorf("--in %s: %w", b.Name, err)
		}
		out[b.Name] = npy.AsDType(t, lang.ParseDType(b.DType))
	}
	var unknown []string
	for name := range specs {
		if _, ok := out[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		var names []string
		for _, b := range p.Inputs {
			names = append(names, b.Name)
		}
		return nil, fmt.Errorf("--in %s: the plan has no input %s; its inputs: %s", unknown[0], unknown[0], strings.Join(names, ", "))
	}
	return out, Match(p.Inputs, out, "input")
}

// Match checks tensors against the plan's bindings before anything
// runs: every binding has its tensor, of its dtype and shape, and no
// tensor is for no binding (what names them: "input", "parameter").
func Match(bindings []plan.Binding, values map[string]*tensor.Tensor, what string) error {
	want := map[string]bool{}
	var missing []string
	for _, b := range bindings {
		want[b.Name] = true
		t, ok := values[b.Name]
		if !ok || t == nil {
			missing = append(missing, b.Name)
			continue
		}
		if err := fits(b, t.DType, t.Shape, what); err != nil {
			return err
		}
	}
	var extra []string
	for name := range values {
		if !want[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	switch {
	case len(missing) > 0:
		return fmt.Errorf("the %ss lack %s %s", what, plural(len(missing), what), strings.Join(missing, ", "))
	case len(extra) > 0:
		return fmt.Errorf("the plan has no %s %s", plural(len(extra), what), strings.Join(extra, ", "))
	}
	return nil
}

// fits checks a tensor of dtype dt and shape against its binding: one
// of the dtype its binding's is stored as (npy.Stored: f32 for bf16) is
// of its binding's, as npy.AsDType reads it.
func fits(b plan.Binding, dt lang.DType, shape []int, what string) error {
	if want := lang.ParseDType(b.DType); dt == npy.Stored(want) {
		dt = want
	}
	if dt.String() != b.DType || !sameShape(shape, b.Shape) {
		return fmt.Errorf("%s %s is %s%v, the plan wants %s%v", what, b.Name, dt, shape, b.DType, b.Shape)
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

func sameShape(a []int, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if int64(a[i]) != b[i] {
			return false
		}
	}
	return true
}

// Params reads the parameters of plan p compiled into dir and checks
// them against the plan: from given, else from the file the plan
// records (DIR/params.npz, checked against its length and SHA-256; a
// plan without parameters has none). Each array's header is checked
// against its binding before its data is read: an array for no
// parameter, or of another dtype or shape, is refused unread.
func Params(p *plan.Plan, dir, given string) (map[string]*tensor.Tensor, error) {
	path, params, err := readParams(p, dir, given)
	if err != nil || params == nil {
		return nil, err
	}
	for _, b := range p.Params {
		if t, ok := params[b.Name]; ok {
			params[b.Name] = npy.AsDType(t, lang.ParseDType(b.DType))
		}
	}
	if err := Match(p.Params, params, "parameter"); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return params, nil
}

// readParams reads the parameters of plan p: from given, else the
// file the plan records in dir (nil, nil: the plan has none).
func readParams(p *plan.Plan, dir, given string) (string, map[string]*tensor.Tensor, error) {
	bindings := map[string]plan.Binding{}
	for _, b := range p.Params {
		bindings[b.Name] = b
	}
	vet := func(name string, dt lang.DType, shape []int) error {
		b, ok := bindings[name]
		if !ok {
			return fmt.Errorf("the plan has no parameter %s", name)
		}
		return fits(b, dt, shape, "parameter")
	}
	if given != "" {
		params, err := npy.ReadNPZVetted(given, vet)
		if err != nil {
			return given, nil, fmt.Errorf("parameters: %w", err)
		}
		return given, params, nil
	}
	switch {
	case p.ParamsFile != nil:
	case len(p.Params) == 0:
		return "", nil, nil
	default:
		return "", nil, fmt.Errorf("the plan records no parameters file: give the parameters with --params")
	}
	path := filepath.Join(dir, p.ParamsFile.Path)
	f, err := p.ParamsFile.Open(dir)
	if err != nil {
		return path, nil, fmt.Errorf("parameters: %w", err)
	}
	defer f.Close()
	params, err := npy.ReadNPZFrom(f, p.ParamsFile.Bytes, vet)
	if err != nil {
		return path, nil, fmt.Errorf("parameters: %s: %w", path, err)
	}
	return path, params, nil
}

// FileName makes a tensor's name usable as a file name ("h.2/w1" ->
// "h.2_w1").
func FileName(name string) string {
	return strings.NewReplacer("/", "_", ":", "_", string(filepath.Separator), "_").Replace(name)
}

// Summary describes a tensor's values in one phrase.
func Summary(t *tensor.Tensor) string {
	if t.Len() == 0 {
		return "(empty)"
	}
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for i := range t.Len() {
		v := t.Flat(i)
		lo, hi, sum = math.Min(lo, v), math.Max(hi, v), sum+v
	}
	return fmt.Sprintf("min %.4g max %.4g mean %.4g", lo, hi, sum/float64(t.Len()))
}
