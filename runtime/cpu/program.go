package cpu

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"
	"unsafe"

	"tofuc/lang"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// Engine runs the kernels of a plan.
type Engine interface {
	// Runs reports whether the engine runs kernel k's launches (the
	// host runs no GPU-only kernel, a GPU no host-only one).
	Runs(k *plan.Kernel) bool
	// Launch runs kernel k, which it Runs; its argument vector (the
	// addresses of its buffers, then that of its status words) is at
	// argv.
	Launch(k *plan.Kernel, argv uintptr) error
	Close() error
}

// statusWords is the length of a launch's status (codegen/emit).
const statusWords = 3

// Program is a plan loaded into memory, ready to run.
type Program struct {
	Plan   *plan.Plan
	engine Engine
	arenas []*native.Memory
	// argv holds, for every launch step, its argument vector and status
	// words; args maps a step to its offset there.
	argv  *native.Memory
	args  map[*plan.Step]int64
	bound map[string]*tensor.Tensor // the parameters last bound
	mu    sync.Mutex
	// Timing makes Run record how long each step takes (StepTimes).
	Timing bool
	times  map[*plan.Step]time.Duration
}

// StepTime is how long a step of the last timed run took.
type StepTime struct {
	Device, Step int
	Op, Label    string
	Kernel       int // for a launch
	Seconds      float64
}

// StepTimes lists the steps of the last run with Timing set, in device
// and step order.
func (pr *Program) StepTimes() []StepTime {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []StepTime
	for d, list := range pr.Plan.Steps {
		for i := range list {
			s := &list[i]
			if t, ok := pr.times[s]; ok {
				out = append(out, StepTime{Device: d, Step: i, Op: s.Op, Label: s.Label, Kernel: s.Kernel, Seconds: t.Seconds()})
			}
		}
	}
	return out
}

// Load allocates a plan's arenas and argument vectors; engine runs its
// kernels and is closed with the program.
func Load(p *plan.Plan, engine Engine) (*Program, error) {
	if err := p.Validate(); err != nil {
		engine.Close() // as the program would have
		return nil, err
	}
	pr := &Program{Plan: p, engine: engine, args: map[*plan.Step]int64{}}
	for d := range p.Devices {
		m, err := native.Alloc(p.ArenaBytes[d])
		if err != nil {
			pr.Close()
			return nil, fmt.Errorf("device %d: %w", d, err)
		}
		pr.arenas = append(pr.arenas, m)
	}
	var words int64
	for _, steps := range [][][]plan.Step{p.Init, p.Steps} {
		for d := range steps {
			for i := range steps[d] {
				s := &steps[d][i]
				if s.Op == plan.Launch {
					pr.args[s] = words * 8
					words += int64(len(s.Args)) + 1 + statusWords
				}
			}
		}
	}
	argv, err := native.Alloc(words * 8)
	if err != nil {
		pr.Close()
		return nil, err
	}
	pr.argv = argv
	for s, off := range pr.args {
		vec := pr.words(off, len(s.Args)+1)
		for i, id := range s.Args {
			vec[i] = uint64(pr.addr(id))
		}
		vec[len(s.Args)] = uint64(argv.Addr(off + int64(len(s.Args)+1)*8))
	}
	return pr, nil
}

// Close frees the program's memory and its engine.
func (pr *Program) Close() error {
	for _, m := range pr.arenas {
		m.Free()
	}
	if pr.argv != nil {
		pr.argv.Free()
	}
	if pr.engine != nil {
		return pr.engine.Close()
	}
	return nil
}

func (pr *Program) words(off int64, n int) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&pr.argv.Bytes()[off])), n)
}

func (pr *Program) addr(id int) uintptr {
	b := pr.Plan.Buffers[id]
	return pr.arenas[b.Device].Addr(b.Offset)
}

// bytes is the memory of buffer id.
func (pr *Program) bytes(id int) []byte {
	b := pr.Plan.Buffers[id]
	return pr.arenas[b.Device].Bytes()[b.Offset : b.Offset+b.Bytes]
}

// Run binds the parameters (running the init steps when they changed
// since the last run), writes the inputs, runs the steps and returns the
// outputs by name.
func (pr *Program) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.sameParams(params) {
		if err := pr.write(pr.Plan.Params, params, "parameter"); err != nil {
			return nil, err
		}
		if err := pr.runSteps(pr.Plan.Init); err != nil {
			return nil, err
		}
		pr.bound = maps.Clone(params) // the caller may change its map
	}
	if err := pr.write(pr.Plan.Inputs, inputs, "input"); err != nil {
		return nil, err
	}
	pr.times = nil
	if pr.Timing {
		pr.times = map[*plan.Step]time.Duration{}
	}
	if err := pr.runSteps(pr.Plan.Steps); err != nil {
		return nil, err
	}
	out := map[string]*tensor.Tensor{}
	for _, b := range pr.Plan.Outputs {
		t, err := pr.read(b)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", b.Name, err)
		}
		out[b.Name] = t
	}
	return out, nil
}

func (pr *Program) sameParams(params map[string]*tensor.Tensor) bool {
	if pr.bound == nil || len(params) != len(pr.bound) {
		return false
	}
	for k, v := range params {
		if pr.bound[k] != v {
			return false
		}
	}
	return true
}

// write stores named tensors into their tiles.
func (pr *Program) write(bindings []plan.Binding, values map[string]*tensor.Tensor, what string) error {
	for _, b := range bindings {
		t, ok := values[b.Name]
		if !ok {
			return fmt.Errorf("missing %s %s", what, b.Name)
		}
		if t.DType.String() != b.DType || !sameShape(t.Shape, b.Shape) {
			return fmt.Errorf("%s %s is %s%v, the plan wants %s%v", what, b.Name, t.DType, t.Shape, b.DType, b.Shape)
		}
		for _, tile := range b.Tiles {
			if err := native.Encode(cut(t, tile.Box), pr.bytes(tile.Buffer)); err != nil {
				return err
			}
		}
	}
	return nil
}

// read assembles a named tensor from its tiles.
func (pr *Program) read(b plan.Binding) (*tensor.Tensor, error) {
	dt := lang.ParseDType(b.DType)
	if len(b.Tiles) == 1 && sameShape(ints(b.Shape), pr.Plan.Buffers[b.Tiles[0].Buffer].Shape) {
		return native.Decode(dt, ints(b.Shape), pr.bytes(b.Tiles[0].Buffer)) // the whole tensor
	}
	out := tensor.New(dt, ints(b.Shape))
	for _, tile := range b.Tiles {
		part, err := native.Decode(dt, ints(pr.Plan.Buffers[tile.Buffer].Shape), pr.bytes(tile.Buffer))
		if err != nil {
			return nil, err
		}
		paste(out, part, tile.Box)
	}
	return out, nil
}

// runSteps runs every device's list of steps, each device in a goroutine
// of its own; a step waits for the steps in its After list.
func (pr *Program) runSteps(lists [][]plan.Step) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make([][]chan struct{}, len(lists))
	for d, list := range lists {
		done[d] = make([]chan struct{}, len(list))
		for i := range list {
			done[d][i] = make(chan struct{})
		}
	}
	errs := make([]error, len(lists))
	var wg sync.WaitGroup
	var timesMu sync.Mutex
	for d := range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lists[d] {
				s := &lists[d][i]
				for _, r := range s.After {
					select {
					case <-done[r.Device][r.Step]:
					case <-ctx.Done():
						return
					}
				}
				start := time.Now()
				if err := pr.step(s); err != nil {
					errs[d] = fmt.Errorf("device %d, step %d (%s %s): %w", d, i, s.Op, s.Label, err)
					cancel()
					return
				}
				if pr.times != nil && pr.runs(s) {
					timesMu.Lock()
					pr.times[s] = time.Since(start)
					timesMu.Unlock()
				}
				close(done[d][i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (pr *Program) step(s *plan.Step) error {
	switch s.Op {
	case plan.Launch:
		return pr.launch(s)
	case plan.Copy:
		pr.copyBox(s)
		return nil
	case plan.Reduce:
		return pr.reduce(s)
	case plan.Opaque:
		return pr.opaque(s)
	}
	return fmt.Errorf("unknown step %q", s.Op)
}

// runs reports whether the engine runs step s (every step but launches
// of kernels it does not run).
func (pr *Program) runs(s *plan.Step) bool {
	return s.Op != plan.Launch || pr.engine.Runs(&pr.Plan.Kernels[s.Kernel])
}

// launch runs a kernel and reports an out-of-range access it recorded.
func (pr *Program) launch(s *plan.Step) error {
	if !pr.runs(s) {
		return nil
	}
	k := &pr.Plan.Kernels[s.Kernel]
	off := pr.args[s]
	status := pr.words(off+int64(len(s.Args)+1)*8, statusWords)
	status[0], status[1], status[2] = 0, 0, 0
	if err := pr.engine.Launch(k, pr.argv.Addr(off)); err != nil {
		return fmt.Errorf("kernel %s: %w", k.Label, err)
	}
	if status[0] != 0 {
		return outOfRange(k, status)
	}
	return nil
}

// outOfRange is the error a kernel recorded, worded as the interpreter's.
func outOfRange(k *plan.Kernel, status []uint64) error {
	site := int(status[0]) - 1
	if site < 0 || site >= len(k.Sites) {
		return fmt.Errorf("kernel %s reported an unknown error %d", k.Label, status[0])
	}
	st, dim, idx := k.Sites[site], int(status[1]), int64(status[2])
	if dim < 0 || dim >= len(st.Shape) {
		return fmt.Errorf("%s: index %d out of range in tensor %s (shape %v)", st.Pos, idx, st.Tensor, st.Shape)
	}
	return fmt.Errorf("%s: index %d out of range [0, %d) in dimension %d of tensor %s (shape %v)", st.Pos, idx, st.Shape[dim], dim, st.Tensor, st.Shape)
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

func ints(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}
