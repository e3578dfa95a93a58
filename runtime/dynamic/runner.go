package dynamic

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/npy"
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
	Notes  []string
	dir    string
	loader Loader
	mu     sync.Mutex
	progs  map[int64]*executor.Program
}

// Loader loads the plan p of folder dir on its devices.
type Loader func(p *plan.Plan, dir string) (*executor.Program, error)

// OnKind loads plans on devices of a kind (executor.Open).
func OnKind(kind string, opts executor.Options) Loader {
	return func(p *plan.Plan, dir string) (*executor.Program, error) { return executor.Open(p, dir, kind, opts) }
}

// Open reads the dynamic plan in dir and loads its largest plan with
// load; the others load when a batch first needs them.
func Open(dir string, load Loader) (_ *Runner, err error) {
	unlock, err := safefile.Lock(dir, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	m, err := Read(dir)
	if err != nil {
		return nil, err
	}
	r := &Runner{Manifest: m, dir: dir, loader: load, progs: map[int64]*executor.Program{}}
	largest := m.Sizes[len(m.Sizes)-1]
	if r.Plan, err = readPlan(dir, largest); err != nil {
		return nil, err
	}
	if err := r.checkAxes(); err != nil {
		return nil, err
	}
	for _, size := range m.Sizes { // every size's plan, before any runs
		p, err := readPlan(dir, size)
		if err != nil {
			return nil, err
		}
		if err := r.consistent(p, size.N); err != nil {
			return nil, fmt.Errorf("%s: %w: compile the plan again", filepath.Join(dir, size.Plan.Path), err)
		}
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
	if err := r.consistent(p, n); err != nil {
		return nil, fmt.Errorf("%s: %w: compile the plan again", filepath.Join(r.dir, size.Plan.Path), err)
	}
	prog, err := r.loader(p, filepath.Join(r.dir, filepath.Dir(size.Plan.Path)))
	if err != nil {
		return nil, err
	}
	r.progs[n] = prog
	return prog, nil
}

// consistent checks that plan p of size n takes and gives what the
// largest size's does at n samples, and the same parameters.
func (r *Runner) consistent(p *plan.Plan, n int64) error {
	at := r.At(n)
	same := func(a, b []plan.Binding) bool {
		return slices.EqualFunc(a, b, func(x, y plan.Binding) bool {
			return x.Name == y.Name && x.DType == y.DType && slices.Equal(x.Shape, y.Shape)
		})
	}
	switch {
	case !same(p.Inputs, at.Inputs):
		return fmt.Errorf("its inputs are not those of a batch of %d", n)
	case !same(p.Outputs, at.Outputs):
		return fmt.Errorf("its outputs are not those of a batch of %d", n)
	case !same(p.Params, r.Plan.Params):
		return fmt.Errorf("its parameters are not the other sizes'")
	}
	return nil
}

// Params reads the parameters every plan shares: from given, else from
// the folder's parameters file that the manifest records (its length
// and SHA-256 checked), checked against the plans' bindings.
func (r *Runner) Params(given string) (map[string]*tensor.Tensor, error) {
	shared := *r.Plan
	shared.ParamsFile = r.Manifest.ParamsFile
	return planio.Params(&shared, r.dir, given)
}

// At is the largest size's plan with its inputs and outputs at a
// batch of n samples: what planio reads and checks a run's tensors by.
func (r *Runner) At(n int64) *plan.Plan {
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
	p := *r.Plan
	p.Inputs, p.Outputs = at(r.Manifest.Inputs, r.Plan.Inputs), at(r.Manifest.Outputs, r.Plan.Outputs)
	return &p
}

// FileBatch is the batch of the batch inputs that specs (input names to
// .npy files) gives, read from their files' headers, which must agree;
// ok is false when specs gives none.
func (r *Runner) FileBatch(specs map[string]string) (n int64, ok bool, err error) {
	shapes := map[string][]int{}
	for _, a := range r.Manifest.Inputs {
		path, given := specs[a.Name]
		if !given || !a.Batched() {
			continue
		}
		m, err := npy.Map(path)
		if err != nil {
			return 0, false, fmt.Errorf("--in %s: %w", a.Name, err)
		}
		shapes[a.Name] = m.Shape()
		m.Close()
	}
	if len(shapes) == 0 {
		return 0, false, nil
	}
	n, err = r.Batch(shapes)
	return n, err == nil, err
}

// CheckMemory refuses a batch of n samples whose inputs and outputs
// would not fit in this machine's memory, before any is allocated.
func (r *Runner) CheckMemory(n int64) error {
	at := r.At(n)
	need := int64(0)
	for _, b := range slices.Concat(at.Inputs, at.Outputs) {
		cells, err := plan.Cells(b.Shape)
		if err != nil {
			return fmt.Errorf("a batch of %d samples: %s of shape %v is too large: %w", n, b.Name, b.Shape, err)
		}
		need += cells * tensor.ElementBytes
	}
	return exec.CheckMemory(fmt.Sprintf("a batch of %d samples (its inputs and outputs)", n), need)
}

// samples is the number of samples of a tensor of the shape given.
func (a Axis) samples(shape []int) (int64, error) {
	if a.Dim >= len(shape) {
		return 0, fmt.Errorf("rank %d, but its batch is dimension %d", len(shape), a.Dim)
	}
	if ext := int64(shape[a.Dim]); ext > 0 && ext%a.Factor == 0 {
		return ext / a.Factor, nil
	}
	return 0, fmt.Errorf("%d along its batch dimension %d: a positive multiple of %d (its extent per sample) was expected", shape[a.Dim], a.Dim, a.Factor)
}

// Batch is the number of samples of a run's inputs of these shapes (by
// name): every batch input's, which must agree.
func (r *Runner) Batch(shapes map[string][]int) (int64, error) {
	n := int64(-1)
	for _, a := range r.Manifest.Inputs {
		shape, ok := shapes[a.Name]
		if !ok || !a.Batched() {
			continue
		}
		m, err := a.samples(shape)
		switch {
		case err != nil:
			return 0, fmt.Errorf("input %s: %w", a.Name, err)
		case n >= 0 && m != n:
			return 0, fmt.Errorf("input %s holds %d samples, another input %d", a.Name, m, n)
		}
		n = m
	}
	if n < 0 {
		return 0, fmt.Errorf("no batch input given")
	}
	return n, nil
}

// Run computes the outputs of a batch of any size (see the package
// comment); params are every plan's (Params).
func (r *Runner) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	shapes := map[string][]int{}
	for name, t := range inputs {
		shapes[name] = t.Shape
	}
	n, err := r.Batch(shapes)
	if err != nil {
		return nil, err
	}
	if err := planio.Match(r.At(n).Inputs, inputs, "input"); err != nil {
		return nil, err
	}
	if err := r.CheckMemory(n); err != nil {
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
