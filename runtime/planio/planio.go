// Package planio reads the inputs and parameters of a compiled plan
// from NumPy files and writes its outputs: what `tofuc run` and
// `tofuc-run` share. Tensors are `.npy` files (bf16 ones stored as f32,
// as NumPy has no bf16), parameters one `.npz`; an output's file is its
// name with '/' and ':' made '_' (FileName).
package planio

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

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
		return nil, fmt.Errorf("--in %s: the plan has no input %s", unknown[0], unknown[0])
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

// Params reads the parameters of plan p compiled into dir: from given,
// else from DIR/params.npz (which a plan without parameters may lack).
// Each array's header is checked against its binding before its data is
// read: an array for no parameter, or of another dtype or shape, is
// refused unread.
func Params(p *plan.Plan, dir, given string) (map[string]*tensor.Tensor, error) {
	path := given
	if path == "" {
		path = filepath.Join(dir, "params.npz")
	}
	bindings := map[string]plan.Binding{}
	for _, b := range p.Params {
		bindings[b.Name] = b
	}
	params, err := npy.ReadNPZVetted(path, func(name string, dt lang.DType, shape []int) error {
		b, ok := bindings[name]
		if !ok {
			return fmt.Errorf("the plan has no parameter %s", name)
		}
		return fits(b, dt, shape, "parameter")
	})
	if errors.Is(err, os.ErrNotExist) && given == "" && len(p.Params) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
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

// WriteOutputs writes each output to DIR/NAME.npy (FileName), in the
// order of their names, and says so on w.
func WriteOutputs(dir string, outputs map[string]*tensor.Tensor, w io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(outputs))
	for n := range outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := outputs[n]
		path := filepath.Join(dir, FileName(n)+".npy")
		if err := npy.WriteFile(path, t); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %s%v %s -> %s\n", n, t.DType, t.Shape, Summary(t), path)
	}
	return nil
}
