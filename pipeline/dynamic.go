package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"tofuc/analysis/batchdim"
	"tofuc/lang/ir"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/plan"
	"tofuc/runtime/safefile"
)

// Dynamic asks for a plan of a dynamic batch (runtime/dynamic): the
// model's attribute or input extent Symbol left free, and one plan per
// size of Sizes (ascending), which a batch of any size runs in chunks of.
type Dynamic struct {
	Symbol string
	Sizes  []int64
}

// DefaultDynamicSizes are the sizes --dynamic NAME compiles: the powers
// of two up to 256, so that no batch pads more than it holds.
var DefaultDynamicSizes = []int64{1, 2, 4, 8, 16, 32, 64, 128, 256}

// maxDynamicSizes bounds the sizes of one dynamic plan (each is a
// compile).
const maxDynamicSizes = 32

// ParseDynamic reads --dynamic NAME, NAME=N,N,... or NAME=LO..HI.
func ParseDynamic(s string) (*Dynamic, error) {
	name, list, hasList := strings.Cut(s, "=")
	d := &Dynamic{Symbol: strings.TrimSpace(name), Sizes: slices.Clone(DefaultDynamicSizes)}
	if d.Symbol == "" {
		return nil, fmt.Errorf("--dynamic %q: expected NAME or NAME=N,N,... (the batch attribute, e.g. batch)", s)
	}
	if !hasList {
		return d, nil
	}
	d.Sizes = nil
	size := func(part string) (int64, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil || n < 1 || n > 1<<20 {
			return 0, fmt.Errorf("--dynamic %s: %q is not a batch size (1 to %d)", s, part, 1<<20)
		}
		return n, nil
	}
	if from, to, isRange := strings.Cut(list, ".."); isRange {
		lo, err := size(from)
		if err != nil {
			return nil, err
		}
		hi, err := size(to)
		if err != nil {
			return nil, err
		}
		if lo > hi {
			return nil, fmt.Errorf("--dynamic %s: an empty range", s)
		}
		d.Sizes = rangeSizes(lo, hi)
	} else {
		for _, part := range strings.Split(list, ",") {
			n, err := size(part)
			if err != nil {
				return nil, err
			}
			d.Sizes = append(d.Sizes, n)
		}
	}
	slices.Sort(d.Sizes)
	d.Sizes = slices.Compact(d.Sizes)
	if len(d.Sizes) > maxDynamicSizes {
		return nil, fmt.Errorf("--dynamic %s: %d sizes, at most %d (each is a compile)", s, len(d.Sizes), maxDynamicSizes)
	}
	return d, nil
}

// rangeSizes are the sizes of --dynamic NAME=LO..HI: LO, the powers of
// two between, and HI.
func rangeSizes(lo, hi int64) []int64 {
	out := []int64{lo}
	for p := int64(1); p < hi; p *= 2 {
		if p > lo {
			out = append(out, p)
		}
	}
	if hi > lo {
		out = append(out, hi)
	}
	return out
}

// DynamicResult is a compiled dynamic plan: its manifest, and each
// size with its compile, ascending.
type DynamicResult struct {
	Manifest *dynamic.Manifest
	Sizes    []int64
	Results  []*Result
}

// CompileDynamic compiles the model called name of the file at path,
// with the attributes set, into dir as a dynamic plan: it proves that
// the model computes each sample on its own (analysis/batchdim), then
// compiles it at every size into dir/SYMBOL-N, the parameters shared.
// One device, inference only: a training step or a partition mixes the
// samples.
func CompileDynamic(path, name string, set map[string]ir.AttrValue, d Dynamic, dir string, opts Options) (*DynamicResult, error) {
	switch {
	case opts.Train != nil:
		return nil, errors.New("--dynamic compiles inference plans: a training step reduces over the batch (its loss), so its batch is fixed")
	case opts.Devices > 1:
		return nil, errors.New("--dynamic compiles for one device")
	case len(d.Sizes) == 0 || slices.Min(d.Sizes) < 1:
		return nil, fmt.Errorf("--dynamic: batch sizes %v (positive ones are needed)", d.Sizes)
	}
	d.Sizes = slices.Compact(slices.Sorted(slices.Values(d.Sizes)))
	f, err := loadModelFile(path)
	if err != nil {
		return nil, err
	}
	axes, err := proveSampleWise(f, name, set, d)
	if err != nil {
		return nil, err
	}
	st, err := safefile.Stage(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	res := &DynamicResult{Manifest: &dynamic.Manifest{Symbol: d.Symbol, Inputs: axes.inputs, Outputs: axes.outputs}, Sizes: d.Sizes}
	for i, n := range d.Sizes {
		opts.progress().Show("%s = %d (%d of %d sizes)", d.Symbol, n, i+1, len(d.Sizes))
		r, err := compileSize(f, name, set, d.Symbol, n, st.Path, dir, opts)
		if err != nil {
			return nil, fmt.Errorf("%s = %d: %w", d.Symbol, n, err)
		}
		res.Results = append(res.Results, r)
	}
	if err := res.finish(st.Path); err != nil {
		return nil, err
	}
	if err := commitLast(st, dynamic.ManifestFile); err != nil {
		return nil, err
	}
	return res, nil
}

type batchAxes struct{ inputs, outputs []dynamic.Axis }

// proveSampleWise elaborates the model with the symbol free and proves
// it computes each sample on its own at every size.
func proveSampleWise(f *modelFile, name string, set map[string]ir.AttrValue, d Dynamic) (*batchAxes, error) {
	g, err := f.module.SymbolicModel(name, set, d.Symbol)
	if err != nil {
		return nil, fmt.Errorf("--dynamic %s: %w", d.Symbol, err)
	}
	res, err := batchdim.Check(g, d.Symbol, d.Sizes)
	if err != nil {
		return nil, fmt.Errorf("--dynamic %s: %s cannot run a batch in parts: %w", d.Symbol, g.Name, err)
	}
	axes := func(named []batchdim.Named) []dynamic.Axis {
		var out []dynamic.Axis
		for _, a := range named {
			out = append(out, dynamic.Axis{Name: a.Name, Dim: a.Dim, Factor: a.Factor})
		}
		return out
	}
	return &batchAxes{axes(res.Inputs), axes(res.Outputs)}, nil
}

// sizeFolder is the folder of size n's plan.
func sizeFolder(symbol string, n int64) string { return fmt.Sprintf("%s-%d", symbol, n) }

// compileSize compiles the model at one size into its folder of the
// staging folder stage (final: the dynamic plan's folder).
func compileSize(f *modelFile, name string, set map[string]ir.AttrValue, symbol string, n int64, stage, final string, opts Options) (*Result, error) {
	at := maps.Clone(set)
	if at == nil {
		at = map[string]ir.AttrValue{}
	}
	at[symbol] = ir.AttrValue{Kind: ir.AttrInt, Int: n}
	m, err := f.model(name, at)
	if err != nil {
		return nil, err
	}
	sub := filepath.Join(stage, sizeFolder(symbol, n))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, err
	}
	res, err := cached(m, sub, opts, func() (*Result, error) {
		return compile(m, sub, filepath.Join(final, sizeFolder(symbol, n)), opts)
	})
	if err != nil {
		return nil, err
	}
	res.Dir = sub
	return res, nil
}

// finish shares the plans' parameters (one file, the others hard links
// to it, or copies where links fail) and writes the manifest into stage.
func (res *DynamicResult) finish(stage string) error {
	m := res.Manifest
	first := res.Results[0].Plan
	m.Model = first.Model
	for i, r := range res.Results {
		if !sameParamsFile(r.Plan.ParamsFile, first.ParamsFile) {
			return fmt.Errorf("the plans of %s = %d and %d have different parameters: a dynamic plan needs the same parameters at every size", m.Symbol, res.Sizes[0], res.Sizes[i])
		}
	}
	if first.ParamsFile != nil {
		shared := filepath.Join(stage, "params.npz")
		if err := os.Rename(filepath.Join(res.Results[0].Dir, "params.npz"), shared); err != nil {
			return err
		}
		for _, r := range res.Results {
			if err := linkOrCopy(shared, filepath.Join(r.Dir, "params.npz")); err != nil {
				return err
			}
		}
		f, err := plan.NewFile(stage, "params.npz")
		if err != nil {
			return err
		}
		m.ParamsFile = &f
	}
	for i, r := range res.Results {
		f, err := plan.NewFile(stage, filepath.Join(filepath.Base(r.Dir), "plan.json"))
		if err != nil {
			return err
		}
		m.Sizes = append(m.Sizes, dynamic.Size{N: res.Sizes[i], Plan: f})
	}
	return m.Write(stage)
}

func sameParamsFile(a, b *plan.File) bool {
	return a == nil && b == nil || a != nil && b != nil && a.SHA256 == b.SHA256 && a.Bytes == b.Bytes
}

// linkOrCopy makes dst the file src, by a hard link where the file
// system allows, else a copy.
func linkOrCopy(src, dst string) error {
	os.Remove(dst)
	if os.Link(src, dst) == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return safefile.WriteFile(dst, data, 0o644)
}
