package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"sort"
	"tofuc/runtime/safefile"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// Check is what a compiled plan should compute: inputs, parameters, the
// outputs another runtime computed from them and the tolerance of each.
// It is written beside the plan (CheckDir) so that a GPU machine, which
// has no compiler, can check the plan there (docs/gpu.md). Inputs and
// parameters that Filled gives are not written (a model's weights would
// make the check large), only the outputs.
type Check struct {
	Inputs, Params, Want map[string]*tensor.Tensor
	Tolerance            map[string]tensor.Tolerance
	// Bounds, for the outputs that have one, is each element's own
	// tolerance (absolute, of the output's shape): a plan compiled in a
	// precision mode that computes in f32 is checked against the
	// rounding bounds of its arithmetic (analysis/rounding), not one
	// tolerance per output.
	Bounds map[string]*tensor.Tensor
	Filled bool // Inputs and Params are Filled's
}

// CheckDir is the folder of a plan's Check, inside the plan's folder.
const CheckDir = "check"

// Write writes the check into the plan folder dir.
func (c *Check) Write(dir string) error {
	d := filepath.Join(dir, CheckDir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	files := map[string]map[string]*tensor.Tensor{"want": c.Want}
	if !c.Filled {
		files["inputs"], files["params"] = c.Inputs, c.Params
	}
	if len(c.Bounds) > 0 {
		files["bounds"] = c.Bounds
	}
	for name, ts := range files {
		if err := npy.WriteNPZ(filepath.Join(d, name+".npz"), ts); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(c.Tolerance, "", " ")
	if err != nil {
		return err
	}
	return safefile.WriteFile(filepath.Join(d, "tolerance.json"), b, 0o644)
}

// ReadCheck reads the check of plan p from its folder dir.
func ReadCheck(dir string, p *plan.Plan) (*Check, error) {
	d := filepath.Join(dir, CheckDir)
	c := &Check{}
	for _, f := range []struct {
		name     string
		to       *map[string]*tensor.Tensor
		bindings []plan.Binding
	}{{"inputs", &c.Inputs, p.Inputs}, {"params", &c.Params, p.Params}, {"want", &c.Want, p.Outputs}} {
		ts, err := npy.ReadNPZ(filepath.Join(d, f.name+".npz"))
		if errors.Is(err, os.ErrNotExist) && f.name != "want" {
			*f.to, c.Filled = Filled(f.bindings), true
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, b := range f.bindings {
			if t, ok := ts[b.Name]; ok {
				ts[b.Name] = npy.AsDType(t, lang.ParseDType(b.DType))
			}
		}
		*f.to = ts
	}
	bounds, err := npy.ReadNPZ(filepath.Join(d, "bounds.npz"))
	switch {
	case err == nil:
		c.Bounds = bounds
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(d, "tolerance.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &c.Tolerance); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(d, "tolerance.json"), err)
	}
	return c, nil
}

// Filled gives every binding deterministic values: integers 0 and 1 (in
// range as labels and indices), floats uniform in [0.5, 1.5) for vectors
// (positive, as scales and variances must be) and uniform with variance
// 1/fan-in for matrices and kernels (fan-in: the product of the
// dimensions after the first), so that activations stay finite through
// deep models.
func Filled(bindings []plan.Binding) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, b := range bindings {
		dt := lang.ParseDType(b.DType)
		t := tensor.New(dt, ints(b.Shape))
		scale, offset := 1.0, 0.5
		if len(b.Shape) >= 2 {
			fanIn := tensor.NumElements(ints(b.Shape[1:]))
			scale, offset = 2*math.Sqrt(3/float64(max(fanIn, 1))), -0.5
		}
		seed := fnv64(b.Name)
		for i := range t.Len() {
			u := float64(splitmix(seed+uint64(i))>>11) / (1 << 53)
			if dt.IsFloat() {
				t.SetFlat(i, scale*(u+offset))
			} else {
				t.SetFlat(i, math.Floor(2*u))
			}
		}
		out[b.Name] = t
	}
	return out
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// splitmix is SplitMix64's output function: a well-spread hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Compare reports every output of got that differs from the check's
// beyond its tolerance or its elements' bounds (exact where neither is
// given), or is missing.
func (c *Check) Compare(got map[string]*tensor.Tensor) error {
	names := make([]string, 0, len(c.Want))
	for name := range c.Want {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		g, ok := got[name]
		if !ok {
			errs = append(errs, fmt.Errorf("output %s: missing", name))
			continue
		}
		var err error
		if bound, ok := c.Bounds[name]; ok {
			err = tensor.CompareBounded(g, c.Want[name], bound, 1)
		} else {
			err = tensor.Compare(g, c.Want[name], c.Tolerance[name])
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("output %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Opener opens the logical devices of plan p, compiled into folder dir.
type Opener func(p *plan.Plan, dir string) ([]Device, error)

// RunCheck runs the plan in folder dir on the devices open gives, with the
// check's inputs and parameters, and compares the outputs with it.
func RunCheck(dir string, open Opener) error {
	p, err := plan.Read(filepath.Join(dir, "plan.json"))
	if err != nil {
		return err
	}
	c, err := ReadCheck(dir, p)
	if err != nil {
		return err
	}
	devs, err := open(p, dir)
	if err != nil {
		return err
	}
	prog, err := Load(p, devs)
	if err != nil {
		return err
	}
	defer prog.Close()
	got, err := prog.Run(c.Inputs, c.Params)
	if err != nil {
		return err
	}
	return c.Compare(got)
}

// CheckDirs lists the plan folders directly under root that hold a
// check, in order.
func CheckDirs(root string) ([]string, error) {
	found, err := filepath.Glob(filepath.Join(root, "*", CheckDir, "tolerance.json"))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = filepath.Dir(filepath.Dir(f))
	}
	sort.Strings(out)
	return out, nil
}
