package dynamic

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/safefile"
	"tofuc/runtime/tensor"
)

// Runner runs a dynamic plan on devices of one kind.
type Runner struct {
	Manifest *Manifest
	// Plan is the plan of the largest size: its parameters are every
	// plan's, its inputs and outputs every plan's but for the batch.
	Plan *plan.Plan
	// Notes are what loading the largest plan said (executor.Program).
	Notes []string
	dir   string
	kind  string
	opts  executor.Options
	mu    sync.Mutex
	progs map[int64]*executor.Program
}

// Open reads the dynamic plan in dir and loads its largest plan on
// devices of kind; the others load when a batch first needs them.
func Open(dir, kind string, opts executor.Options) (_ *Runner, err error) {
	unlock, err := safefile.Lock(dir, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	m, err := Read(dir)
	if err != nil {
		return nil, err
	}
	r := &Runner{Manifest: m, dir: dir, kind: kind, opts: opts, progs: map[int64]*executor.Program{}}
	largest := m.Sizes[len(m.Sizes)-1]
	if r.Plan, err = readPlan(dir, largest); err != nil {
		return nil, err
	}
	if err := r.checkAxes(); err != nil {
		return nil, err
	}
	prog, err := r.load(largest.N)
	if err != nil {
		return nil, err
	}
	r.Notes = prog.Notes
	return r, nil
}

// checkAxes checks that the manifest's axes name the plan's inputs and
// outputs, in order.
func (r *Runner) checkAxes() error {
	same := func(axes []Axis, bindings []plan.Binding) bool {
		return slices.EqualFunc(axes, bindings, func(a Axis, b plan.Binding) bool {
			return a.Name == b.Name && a.Dim < len(b.Shape)
		})
	}
	if !same(r.Manifest.Inputs, r.Plan.Inputs) || !same(r.Manifest.Outputs, r.Plan.Outputs) {
		return fmt.Errorf("%s: the manifest's inputs and outputs are not its plans': compile the plan again", filepath.Join(r.dir, ManifestFile))
	}
	return nil
}

// load returns the program of size n, loading it the first time.
func (r *Runner) load(n int64) (*executor.Program, error) {
	if prog, ok := r.progs[n]; ok {
		return prog, nil
	}
	i := slices.IndexFunc(r.Manifest.Sizes, func(s Size) bool { return s.N == n })
	size := r.Manifest.Sizes[i]
	p, err := readPlan(r.dir, size)
	if err != nil {
		return nil, err
	}
	prog, err := executor.Open(p, filepath.Join(r.dir, filepath.Dir(size.Plan.Path)), r.kind, r.opts)
	if err != nil {
		return nil, err
	}
	r.progs[n] = prog
	return prog, nil
}

// Params reads the parameters every plan shares: from given, else from
// the folder's parameters file, checked against the plans' bindings.
func (r *Runner) Params(given string) (map[string]*tensor.Tensor, error) {
	largest := r.Manifest.Sizes[len(r.Manifest.Sizes)-1]
	return planio.Params(r.Plan, filepath.Join(r.dir, filepath.Dir(largest.Plan.Path)), given)
}

// Bindings are the plan's inputs and outputs at a batch of n samples.
func (r *Runner) Bindings(n int64) (inputs, outputs []plan.Binding) {
	at := func(axes []Axis, bindings []plan.Binding) []plan.Binding {
		out := make([]plan.Binding, len(bindings))
		for i, b := range bindings {
			b.Shape = slices.Clone(b.Shape)
			b.Tiles = nil
			if a := axes[i]; a.Batched() {
				b.Shape[a.Dim] = a.Factor * n
			}
			out[i] = b
		}
		return out
	}
	return at(r.Manifest.Inputs, r.Plan.Inputs), at(r.Manifest.Outputs, r.Plan.Outputs)
}

// Batch is the number of samples of inputs: every batch input's extent
// along its batch axis over its factor, the same for all.
func (r *Runner) Batch(inputs map[string]*tensor.Tensor) (int64, error) {
	n := int64(-1)
	for _, a := range r.Manifest.Inputs {
		t, ok := inputs[a.Name]
		if !ok || !a.Batched() {
			continue
		}
		if a.Dim >= len(t.Shape) {
			return 0, fmt.Errorf("input %s has rank %d; its batch is dimension %d", a.Name, len(t.Shape), a.Dim)
		}
		ext := int64(t.Shape[a.Dim])
		switch {
		case ext == 0 || ext%a.Factor != 0:
			return 0, fmt.Errorf("input %s has %d along its batch dimension %d: a positive multiple of %d (%d per sample) was expected", a.Name, ext, a.Dim, a.Factor, a.Factor)
		case n >= 0 && ext/a.Factor != n:
			return 0, fmt.Errorf("input %s holds %d samples, another input %d", a.Name, ext/a.Factor, n)
		}
		n = ext / a.Factor
	}
	if n < 0 {
		return 0, fmt.Errorf("no batch input given")
	}
	return n, nil
}

// Run computes the outputs of a batch of any size (see the package
// comment); params are every plan's (Params).
func (r *Runner) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	n, err := r.Batch(inputs)
	if err != nil {
		return nil, err
	}
	ins, _ := r.Bindings(n)
	if err := planio.Match(ins, inputs, "input"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out map[string]*tensor.Tensor
	for _, c := range r.chunks(n) {
		prog, err := r.load(c.size)
		if err != nil {
			return nil, err
		}
		part, err := prog.Run(r.chunkInputs(inputs, c), params)
		if err != nil {
			return nil, err
		}
		if c.start == 0 && c.count == n && c.count == c.size {
			return part, nil // a compiled size: the plan's outputs as they are
		}
		if out == nil {
			out = r.allocate(part, n)
		}
		r.placeOutputs(out, part, c)
	}
	return out, nil
}

// Close frees every loaded plan.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for n, prog := range r.progs {
		if err := prog.Close(); err != nil && first == nil {
			first = err
		}
		delete(r.progs, n)
	}
	return first
}
