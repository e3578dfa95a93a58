package interp

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// EvalInstance evaluates inst on inputs (matched to inst.Inputs by
// position) with the shape symbols in syms, and returns its outputs in
// order. See the package comment for the semantics.
func EvalInstance(inst *ir.Instance, inputs []*tensor.Tensor, syms map[string]int64) (out []*tensor.Tensor, err error) {
	defer recoverInternal(&err)
	return evalInstance(inst, inputs, syms, nil, config{})
}

// recoverInternal turns a panic (malformed IR that slipped through the
// checks, or a bug) into an error.
func recoverInternal(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(evalError); ok {
			*err = e.err
			return
		}
		*err = fmt.Errorf("interp: internal error: %v\n%s", r, debug.Stack())
	}
}

// config holds internal evaluation settings.
type config struct {
	workers int  // goroutines per Def; <= 0 means GOMAXPROCS
	scalar  bool // disable the vector path (tests compare both)
}

// evalInstance binds symbols from syms first, then from the input shapes,
// then from fallback.
func evalInstance(inst *ir.Instance, inputs []*tensor.Tensor, syms, fallback map[string]int64, cfg config) ([]*tensor.Tensor, error) {
	if inst == nil {
		return nil, fmt.Errorf("interp: nil instance")
	}
	if len(inputs) != len(inst.Inputs) {
		return nil, lang.Errorf(inst.Pos, "%s takes %d inputs, got %d", inst.Op, len(inst.Inputs), len(inputs))
	}
	env := map[string]int64{}
	for k, v := range syms {
		env[k] = v
	}
	var shapes []lang.ShapeUse
	for i, in := range inst.Inputs {
		x := inputs[i]
		if err := x.Validate(); err != nil {
			return nil, lang.Errorf(inst.Pos, "%s: input %s: %v", inst.Op, in.Name, err)
		}
		if x.DType != in.DType {
			return nil, lang.Errorf(inst.Pos, "%s: input %s is %s, want %s", inst.Op, in.Name, x.DType, in.DType)
		}
		shapes = append(shapes, lang.ShapeUse{What: "input " + in.Name, Declared: in.Shape, Actual: x.Shape})
	}
	if err := lang.BindShapes(env, shapes, fallback); err != nil {
		return nil, lang.Errorf(inst.Pos, "%s: %v", inst.Op, err)
	}
	c := &compiler{
		syms:    env,
		slots:   map[*ir.Var]int{},
		tensors: map[*ir.Tensor]*tensor.Tensor{},
		byName:  map[string]*tensor.Tensor{},
		pending: map[*tensor.Tensor]bool{},
		scalar:  cfg.scalar,
		row:     -1,
		blk:     -1,
	}
	for i, in := range inst.Inputs {
		c.tensors[in] = inputs[i]
		c.byName[in.Name] = inputs[i]
	}
	defs := append(append([]*ir.Def{}, inst.Locals...), inst.Outputs...)
	for _, d := range defs {
		if d == nil || d.Tensor == nil || d.Body == nil {
			return nil, lang.Errorf(inst.Pos, "%s: malformed definition", inst.Op)
		}
		shape := make([]int, len(d.Tensor.Shape))
		for i, dim := range d.Tensor.Shape {
			n, err := c.dim(dim, d.Pos)
			if err != nil {
				return nil, err
			}
			if n < 0 {
				return nil, lang.Errorf(d.Pos, "tensor %s has a negative extent: %s = %d", d.Tensor.Name, dim, n)
			}
			shape[i] = int(n)
		}
		if err := tensor.CheckSize(shape); err != nil {
			return nil, lang.Errorf(d.Pos, "tensor %s: %v", d.Tensor.Name, err)
		}
		if d.Tensor.DType.Size() == 0 {
			return nil, lang.Errorf(d.Pos, "tensor %s has invalid dtype %s", d.Tensor.Name, d.Tensor.DType)
		}
		t := tensor.New(d.Tensor.DType, shape)
		c.tensors[d.Tensor] = t
		c.byName[d.Tensor.Name] = t
		c.pending[t] = true
	}
	for _, d := range defs {
		p, err := c.def(d)
		if err != nil {
			var le *lang.Error
			if e, ok := err.(*lang.Error); ok {
				le = e
			} else {
				le = lang.Errorf(d.Pos, "%v", err)
			}
			if !le.Pos.IsValid() {
				le.Pos = d.Pos
			}
			return nil, le
		}
		if err := p.run(len(c.ext), c.nbuf, cfg.workers); err != nil {
			return nil, err
		}
		delete(c.pending, p.t)
	}
	out := make([]*tensor.Tensor, len(inst.Outputs))
	for i, d := range inst.Outputs {
		out[i] = c.tensors[d.Tensor]
	}
	return out, nil
}

// defPlan is a compiled Def.
type defPlan struct {
	t     *tensor.Tensor
	slots []int
	exts  []int64
	store func(off int, f *frame) // scalar path
	vbody vfexpr                  // vector path, when not nil
	nh    int64                   // rows per block on the vector path (1: no blocks)
}

func (c *compiler) def(d *ir.Def) (*defPlan, error) {
	t := c.tensors[d.Tensor]
	if len(d.Vars) != len(t.Shape) {
		return nil, lang.Errorf(d.Pos, "tensor %s of rank %d is defined with %d index variables", d.Tensor.Name, len(t.Shape), len(d.Vars))
	}
	slots, exts, err := c.bind(d.Vars, d.Pos)
	if err != nil {
		return nil, err
	}
	defer c.unbind(slots)
	for i, n := range exts {
		if n != int64(t.Shape[i]) {
			return nil, lang.Errorf(d.Pos, "index variable %s ranges over %d values, but dimension %d of %s has %d", d.Vars[i].Name, n, i, d.Tensor.Name, t.Shape[i])
		}
	}
	p := &defPlan{t: t, slots: slots, exts: exts}
	if !c.scalar && len(slots) > 0 && t.DType.IsFloat() && d.Body.Type().IsFloat() {
		c.row, p.nh = slots[len(slots)-1], 1
		if w := exts[len(exts)-1]; len(slots) >= 2 && w > 0 && 2*w <= maxRow {
			c.blk, p.nh = slots[len(slots)-2], maxRow/w
		}
		vb, err := c.vcompile(d.Body)
		if err == nil {
			p.vbody = c.vector(vb)
		}
		c.row, c.blk = -1, -1
		return p, err
	}
	body, err := c.compile(d.Body)
	if err != nil {
		return nil, err
	}
	body = convert(body, d.Body.Type(), t.DType, true)
	if t.DType.IsFloat() {
		data, b := t.F, body.f
		p.store = func(off int, f *frame) { data[off] = b(f) }
	} else {
		data, b := t.I, body.i
		p.store = func(off int, f *frame) { data[off] = b(f) }
	}
	return p, nil
}

// run evaluates the plan's elements, split among workers goroutines.
func (p *defPlan) run(nslots, nbuf, workers int) error {
	total := p.t.Len()
	if total == 0 {
		return nil
	}
	units, do := total, p.chunk
	if p.vbody != nil {
		// A unit is a block.
		nblk, size := p.blocks()
		units, do = int(int64(total)/size*nblk), p.vchunk
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, units)
	chunk := max(1, units/(workers*8))
	var (
		next    atomic.Int64
		stop    atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	work := func() {
		defer wg.Done()
		defer func() {
			if r := recover(); r != nil {
				err, ok := r.(evalError)
				var e error = err.err
				if !ok {
					e = fmt.Errorf("interp: internal error: %v\n%s", r, debug.Stack())
				}
				errOnce.Do(func() { first = e })
				stop.Store(true)
			}
		}()
		f := &frame{v: make([]int64, nslots)}
		if p.vbody != nil {
			f.fb = make([][]float64, nbuf)
			for i := range f.fb {
				f.fb[i] = make([]float64, maxRow)
			}
		}
		for !stop.Load() {
			lo := int(next.Add(int64(chunk))) - chunk
			if lo >= units {
				return
			}
			do(f, lo, min(lo+chunk, units))
		}
	}
	wg.Add(workers)
	for i := 1; i < workers; i++ {
		go work()
	}
	work()
	wg.Wait()
	return first
}

// blocks returns the number of blocks per outer index tuple and the number
// of elements of the Def each such tuple covers.
func (p *defPlan) blocks() (nblk, size int64) {
	r := len(p.exts)
	if p.nh > 1 {
		h := p.exts[r-2]
		return (h + p.nh - 1) / p.nh, h * p.exts[r-1]
	}
	w := p.exts[r-1]
	return (w + maxRow - 1) / maxRow, w
}

// vchunk evaluates the blocks [lo, hi) on the vector path.
func (p *defPlan) vchunk(f *frame, lo, hi int) {
	r := len(p.slots)
	nblk, size := p.blocks()
	inner := 1 // Def dims covered by a block
	if p.nh > 1 {
		inner = 2
	}
	data, dt := p.t.F, p.t.DType
	for u := lo; u < hi; u++ {
		outer, b := int64(u)/nblk, int64(u)%nblk
		rem := outer
		for d := r - 1 - inner; d >= 0; d-- {
			f.v[p.slots[d]] = rem % p.exts[d]
			rem /= p.exts[d]
		}
		var start int64
		if p.nh > 1 {
			h0, w := b*p.nh, p.exts[r-1]
			f.nh, f.w = int(min(p.nh, p.exts[r-2]-h0)), int(w)
			f.v[p.slots[r-2]], f.v[p.slots[r-1]] = h0, 0
			start = h0 * w
		} else {
			k0 := b * maxRow
			f.nh, f.w = 1, int(min(maxRow, size-k0))
			f.v[p.slots[r-1]] = k0
			start = k0
		}
		n := f.nh * f.w
		vals := p.vbody(f, n)[:n]
		out := data[outer*size+start:][:n]
		switch dt {
		case lang.F64:
			copy(out, vals)
		case lang.F32:
			for j, v := range vals {
				out[j] = float64(float32(v))
			}
		default:
			for j, v := range vals {
				out[j] = dt.RoundFloat(v)
			}
		}
	}
}

// chunk evaluates the elements at flat positions [lo, hi) on the scalar
// path.
func (p *defPlan) chunk(f *frame, lo, hi int) {
	r := len(p.slots)
	if r == 0 {
		p.store(0, f)
		return
	}
	idx := make([]int64, r)
	rem := int64(lo)
	for d := r - 1; d >= 0; d-- {
		idx[d] = rem % p.exts[d]
		rem /= p.exts[d]
		f.v[p.slots[d]] = idx[d]
	}
	last, el := p.slots[r-1], p.exts[r-1]
	off := lo
	for {
		for k := idx[r-1]; k < el; k++ {
			if off >= hi {
				return
			}
			f.v[last] = k
			p.store(off, f)
			off++
		}
		idx[r-1] = 0
		d := r - 2
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < p.exts[d] {
				f.v[p.slots[d]] = idx[d]
				break
			}
			idx[d] = 0
			f.v[p.slots[d]] = 0
		}
		if d < 0 {
			return
		}
	}
}

// EvalNode evaluates a node's instance on its inputs with workers
// goroutines per Def (0: GOMAXPROCS); shape symbols bind from the inputs
// DefBytes is what the interpreter allocates for the tensors of defs (an
// instance's locals while it evaluates it; its outputs):
// tensor.ElementBytes an element, 0 for a tensor of symbolic shape,
// math.MaxInt64 past int64.
func DefBytes(defs []*ir.Def) int64 {
	var n int64
	for _, d := range defs {
		if _, concrete := lang.ConstShape(d.Tensor.Shape); !concrete {
			continue
		}
		e, ok := lang.ShapeElements(d.Tensor.Shape)
		var b int64
		if ok {
			b, ok = lang.MulInt64(e, tensor.ElementBytes)
		}
		if ok {
			n, ok = lang.AddInt64(n, b)
		}
		if !ok {
			return math.MaxInt64
		}
	}
	return n
}

// first, then from graphSyms (runtime/exec runs graphs with it).
func EvalNode(inst *ir.Instance, inputs []*tensor.Tensor, graphSyms map[string]int64, workers int) (out []*tensor.Tensor, err error) {
	defer recoverInternal(&err)
	return evalInstance(inst, inputs, nil, graphSyms, config{workers: workers})
}
