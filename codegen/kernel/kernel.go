package kernel

import (
	"fmt"
	"math"
	"slices"

	"tofuc/analysis/schedule"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Kind is what a kernel's lambda is (see the package comment).
type Kind uint8

// Kinds of kernels.
const (
	Elementwise Kind = iota
	Injective
	Gather
	Contraction
	Reduction
)

var kindNames = [...]string{"elementwise", "injective", "gather", "contraction", "reduction"}

func (k Kind) String() string { return kindNames[k] }

// Stage is one lambda of a kernel and where the tensors it reads come from.
type Stage struct {
	Inst *ir.Instance
	// Def is the Def of Inst the stage computes; a fused stage computes
	// Inst's only output.
	Def *ir.Def
	// Bind says where each input of Inst, and each local of Inst that is
	// not recomputed, comes from.
	Bind func(t *ir.Tensor) (Binding, error)
	// Recomputed says whether a local is recomputed where it is read;
	// nil: schedule.Inlined (a schedule may precompute some of those,
	// Schedule.Recomputed).
	Recomputed func(*ir.Def) bool
}

func (st Stage) recomputed(d *ir.Def) bool {
	if st.Recomputed != nil {
		return st.Recomputed(d)
	}
	return schedule.Inlined(st.Inst, d)
}

// Binding is where a tensor a kernel reads comes from: exactly one field
// is set.
type Binding struct {
	Buffer any           // the comparable key of an argument buffer
	Const  *ir.ConstData // a graph constant (rank 0), folded into the code
	Prev   bool          // the previous stage's value at the same index
	Inline *Inline       // a producer evaluated where it is read
}

// Inline is a producer whose only output a kernel computes where it reads
// it (a prologue, schedule.Prologue): the output's lambda evaluated at
// the read's index, the instance's inputs bound by Bind.
type Inline struct {
	Inst *ir.Instance
	Bind func(t *ir.Tensor) (Binding, error)
}

// Arg is an argument buffer of a kernel.
type Arg struct {
	Key     any
	DType   lang.DType
	Shape   []int64
	Written bool // the output (always the last argument)
}

// Site is an access checked at run time that has no default: its index
// out of range is an error, reported with these details.
type Site struct {
	Pos    lang.Pos
	Tensor string
	Shape  []int64
}

// Kernel is one launch's loop nest.
type Kernel struct {
	Label string // the operators or nodes it computes, for messages
	// Call is the model's call site of the node it computes (its first
	// stage's), for messages; not part of what is compiled.
	Call   lang.Pos
	Kind   Kind
	Vars   []*ir.Var // the output index variables, outermost first
	Shape  []int64   // the output shape
	Stages []*ir.Def // evaluated in order at each output index
	Args   []Arg     // the last one is written
	// Reductions are the top-level reductions of the first stage, in
	// evaluation order (a form may split them over a GPU block; Rows.Work
	// counts them).
	Reductions []*ir.Reduce
	Sites      []Site
	// Opaques are the opaque calls to compute on the host before the
	// kernel runs; a kernel with any runs only where a host does.
	Opaques []OpaqueCall
	// GEMM describes the kernel when it is a floating-point sum of
	// products (nil otherwise).
	GEMM *GEMM
	// Rows describes a kernel that computes its output a row at a time
	// (nil otherwise).
	Rows *Rows
	// PackOnly marks a kernel that only packs its GEMM's A factor (B where
	// BPacked) into its output (see Kernel.PackKernel); it does nothing
	// on a GPU.
	PackOnly bool
	// Before, when not nil, is the kernel whose output this one reads
	// and that its launch computes first, a block of rows at a time
	// (schedule's chain): both kernels' first ChainRows variables are
	// the rows, and the launch's arguments are Before's, then this
	// kernel's (LaunchArgs). Only the host runs such a launch: a GPU
	// runs its two kernels as launches of their own (GPUOnly).
	Before    *Kernel
	ChainRows int
	// GPUOnly marks a kernel that only a GPU runs: a half of a chained
	// launch, which the host runs as one launch. It does nothing on the
	// host.
	GPUOnly bool
	// SumIn, when not nil, makes the kernel read its first stage's sum
	// from an argument, where a library's product left it (ReadSum): the
	// host runs it after a host library's call, a GPU after its own's.
	SumIn *SumIn
	// Elements is the number of output elements; ReduceLen the longest
	// top-level reduction range.
	Elements, ReduceLen int64

	source  map[*ir.Tensor]Source
	checked map[*ir.Access][]bool // per dimension: checked at run time
	site    map[*ir.Access]int
}

// Rows is how a kernel computes its output a row at a time: for each
// key (an index of the output's Key variables) the row locals once, in
// order, then every element of the row (the other variables).
type Rows struct {
	Key    []int // positions in Kernel.Vars, ascending
	Locals []RowLocal
	// Count is the number of rows, Len the elements of each, BufferLen
	// the elements of the buffered locals' row buffers together.
	Count, Len, BufferLen int64
}

// Work estimates the work of one row of kernel k: the terms of every
// element's top-level reductions (one for an element with none), the
// row's elements and its buffered locals' alike, and of its other
// locals' reductions.
func (r *Rows) Work(k *Kernel) int64 {
	work := r.Len * terms(k.Reductions)
	for _, l := range r.Locals {
		if l.BufferLen > 0 {
			work += l.BufferLen * terms(l.Reductions)
		} else {
			work += terms(l.Reductions)
		}
	}
	return work
}

// costlyCallWork is what ElementWork counts for a call of a costly math
// function (ir.CostlyFunc): a vectorised exp or tanh is a
// polynomial, a scaling and a division, some twenty operations.
const costlyCallWork = 20

// ElementWork estimates the operations of one output element of k: every
// read and operation of its stages' lambdas (variables and constants are
// none), the locals it recomputes counted at every read, a reduction's
// body at every term, a costly math call as costlyCallWork.
func (k *Kernel) ElementWork() int64 {
	memo := map[*ir.Def]int64{}
	var work func(e ir.Expr) int64
	work = func(e ir.Expr) int64 {
		n := int64(0)
		ir.Walk(e, func(x ir.Expr) bool {
			switch x := x.(type) {
			case *ir.Reduce:
				n = satAdd(n, satMul(ir.Extent(x.Vars), work(x.Body)))
				return false
			case *ir.Call:
				if ir.CostlyFunc(x.Fn) {
					n = satAdd(n, costlyCallWork)
					return true
				}
			case *ir.Access:
				if l := k.source[x.T].Local; l != nil {
					w, ok := memo[l]
					if !ok {
						w = work(l.Body)
						memo[l] = w
					}
					n = satAdd(n, w)
				}
			case *ir.VarRef, *ir.Const:
				return true // operands, not operations
			}
			n = satAdd(n, 1)
			return true
		})
		return n
	}
	total := int64(0)
	for _, st := range k.Stages {
		total = satAdd(total, work(st.Body))
	}
	return total
}

// satAdd and satMul are a + b and a · b for a, b ≥ 0, at most MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// terms is the number of terms of reductions rs, at least 1.
func terms(rs []*ir.Reduce) int64 {
	n := int64(1)
	for _, r := range rs {
		n += ir.Extent(r.Vars)
	}
	return n
}

// BufferBytes is the memory of the row buffers of the buffered locals.
func (r *Rows) BufferBytes() int64 {
	n := int64(0)
	for _, l := range r.Locals {
		n += l.BufferLen * int64(max(1, l.Def.Tensor.DType.Size()))
	}
	return n
}

// RowLocal is a local computed once per row: one value, or a buffer of
// values (schedule.RowLocal.Buffered).
type RowLocal struct {
	Def *ir.Def
	// At holds, for each variable of Def, the position in Kernel.Vars of
	// the variable it is evaluated at, or -1 for a variable the row's
	// buffer spans.
	At []int
	// Reductions are Def's top-level reductions, in evaluation order.
	Reductions []*ir.Reduce
	// BufferLen is the number of elements of a buffered local's buffer
	// (0 for a local of one value).
	BufferLen int64
}

// Buffered are the variables of a buffered local that its buffer spans,
// and their extents (none for a local of one value).
func (l RowLocal) Buffered() ([]*ir.Var, []int64) {
	var vars []*ir.Var
	var shape []int64
	for i, p := range l.At {
		if p < 0 {
			n, _ := l.Def.Vars[i].Extent.IsConst()
			vars, shape = append(vars, l.Def.Vars[i]), append(shape, n)
		}
	}
	return vars, shape
}

// RowVars are the positions in Kernel.Vars that are not in the key.
func (r *Rows) RowVars(rank int) []int {
	var out []int
	for i := range rank {
		if !slices.Contains(r.Key, i) {
			out = append(out, i)
		}
	}
	return out
}

// Source is where an access of a kernel reads, resolved for the emitter.
type Source struct {
	Arg   int       // argument index, or -1
	Const *ir.Const // a folded constant
	Stage int       // a stage's value (at the output index), or -1
	Local *ir.Def   // a local recomputed where it is read
}

// Source returns where tensor t is read from.
func (k *Kernel) Source(t *ir.Tensor) (Source, bool) {
	s, ok := k.source[t]
	return s, ok
}

// Checked reports, per dimension of an access, whether its index must be
// checked at run time, and the access's site (-1 when it has a default).
func (k *Kernel) Checked(a *ir.Access) ([]bool, int) {
	site, ok := k.site[a]
	if !ok {
		site = -1
	}
	return k.checked[a], site
}

// Out is the written argument.
func (k *Kernel) Out() Arg { return k.Args[len(k.Args)-1] }

// LaunchArgs are the buffers a launch of k passes: Before's arguments,
// then k's.
func (k *Kernel) LaunchArgs() []Arg {
	if k.Before == nil {
		return k.Args
	}
	return append(append([]Arg(nil), k.Before.Args...), k.Args...)
}

// Writes are the indexes in LaunchArgs of the arguments a launch of k
// writes (plan.Kernel's Writes): each kernel's output (a chain's two),
// and the workspace a host GEMM packs B into.
func (k *Kernel) Writes() []int {
	var out []int
	for i, a := range k.LaunchArgs() {
		if a.Written || k.sharesB(a.Key) || k.Before != nil && k.Before.sharesB(a.Key) {
			out = append(out, i)
		}
	}
	return out
}

// sharesB reports whether key is the workspace k's host GEMM packs B
// into (not B packed with the weights, which it only reads).
func (k *Kernel) sharesB(key any) bool {
	return k.GEMM != nil && k.GEMM.SharedB != nil && !k.GEMM.BPacked && key == k.GEMM.SharedB
}

// HostOnly reports whether only the host runs k: a packing kernel or a
// chained launch. It does nothing on a GPU.
func (k *Kernel) HostOnly() bool { return k.PackOnly || k.Before != nil }

// ChainRowCount is the number of rows of a chained launch: index tuples
// of k's first ChainRows variables.
func (k *Kernel) ChainRowCount() int64 { return Product(k.Shape[:k.ChainRows]) }

// Build builds the kernel that computes the last stage's tensor into the
// buffer out.
func Build(label string, out any, stages []Stage) (*Kernel, error) {
	if len(stages) == 0 {
		return nil, fmt.Errorf("%s: a kernel without stages", label)
	}
	b := &builder{k: &Kernel{Label: label, source: map[*ir.Tensor]Source{}, checked: map[*ir.Access][]bool{}, site: map[*ir.Access]int{}},
		argIndex: map[any]int{}, buffers: map[*ir.Tensor]any{}, bound: map[*ir.Instance]bool{}, claimed: map[*ir.Tensor]bool{}}
	root := stages[0]
	b.k.Vars = root.Def.Vars
	shape, err := concrete(root.Def.Tensor)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	b.k.Shape = shape
	b.k.Elements = Product(shape)
	for i, st := range stages {
		if b.taken(st.Inst) {
			// The checker shares an instance between like nodes, and
			// the backward instances derived from one forward instance
			// share its input tensors: each stage binds its own.
			st = cloneStage(st)
		}
		if i == 0 {
			b.rootInst = st.Inst
		}
		b.claim(st.Inst)
		if err := b.bindStage(i, st); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		d, err := b.hoistOpaque(st.Def)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		b.k.Stages = append(b.k.Stages, b.composeViews(d))
	}
	for _, d := range b.k.Stages {
		if err := b.accesses(d.Body); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
	}
	last := stages[len(stages)-1].Def.Tensor
	lastShape, err := concrete(last)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	b.k.Args = append(b.k.Args, Arg{Key: out, DType: last.DType, Shape: lastShape, Written: true})
	b.classify()
	return b.k, nil
}

// cloneStage is st on a copy of its instance, whose tensors are bound as
// the originals are.
func cloneStage(st Stage) Stage {
	c := ir.CloneInstance(st.Inst)
	orig := map[*ir.Tensor]*ir.Tensor{}
	for i, t := range c.Inputs {
		orig[t] = st.Inst.Inputs[i]
	}
	def := st.Def
	origDef := map[*ir.Def]*ir.Def{}
	for i, d := range c.Locals {
		orig[d.Tensor] = st.Inst.Locals[i].Tensor
		origDef[d] = st.Inst.Locals[i]
		if st.Inst.Locals[i] == st.Def {
			def = d
		}
	}
	for i, d := range c.Outputs {
		if st.Inst.Outputs[i] == st.Def {
			def = d
		}
	}
	bind := st.Bind
	return Stage{Inst: c, Def: def, Bind: func(t *ir.Tensor) (Binding, error) { return bind(orig[t]) },
		Recomputed: func(d *ir.Def) bool { return st.recomputed(origDef[d]) }}
}

type builder struct {
	k        *Kernel
	argIndex map[any]int
	// buffers are the bound buffers; one becomes an argument when read.
	buffers map[*ir.Tensor]any
	// rootInst is the first stage's instance.
	rootInst *ir.Instance
	// bound holds the instances whose tensors are bound: the stages' and
	// the inlined producers'; claimed, their tensors, from before their
	// bindings are resolved (an inlined producer that shares a tensor
	// with the stage reading it is bound on a copy).
	bound   map[*ir.Instance]bool
	claimed map[*ir.Tensor]bool
}

// claim records that inst's tensors are (about to be) bound.
func (b *builder) claim(inst *ir.Instance) {
	b.bound[inst] = true
	for _, t := range inst.Inputs {
		b.claimed[t] = true
	}
	for _, d := range inst.Locals {
		b.claimed[d.Tensor] = true
	}
}

// bindStage resolves every tensor stage i reads.
func (b *builder) bindStage(i int, st Stage) error {
	for _, t := range st.Inst.Inputs {
		bd, err := st.Bind(t)
		if err != nil {
			return err
		}
		if err := b.bind(t, bd, i); err != nil {
			return err
		}
	}
	for _, d := range st.Inst.Locals {
		if st.recomputed(d) {
			b.k.source[d.Tensor] = Source{Arg: -1, Stage: -1, Local: d}
			continue
		}
		bd, err := st.Bind(d.Tensor)
		if err != nil {
			return err
		}
		if err := b.bind(d.Tensor, bd, i); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) bind(t *ir.Tensor, bd Binding, stage int) error {
	switch {
	case bd.Prev:
		if stage == 0 {
			return fmt.Errorf("tensor %s is bound to the previous stage of the first", t.Name)
		}
		b.k.source[t] = Source{Arg: -1, Stage: stage - 1}
	case bd.Const != nil:
		c := &ir.Const{T: t.DType, Float: bd.Const.Float, Int: bd.Const.Int}
		if len(t.Shape) != 0 {
			return fmt.Errorf("constant %s has rank %d", t.Name, len(t.Shape))
		}
		b.k.source[t] = Source{Arg: -1, Stage: -1, Const: c}
	case bd.Buffer != nil:
		b.buffers[t] = bd.Buffer
	case bd.Inline != nil:
		return b.bindInline(t, bd.Inline, stage)
	default:
		return fmt.Errorf("tensor %s has no binding", t.Name)
	}
	return nil
}

// bindInline binds t to the output of producer p recomputed where it is
// read, and p's inputs as p's binder says (on a copy of p's instance when
// another read already bound it: the checker shares instances).
func (b *builder) bindInline(t *ir.Tensor, p *Inline, stage int) error {
	inst, bind := p.Inst, p.Bind
	if b.taken(inst) {
		inst = ir.CloneInstance(p.Inst)
		orig := map[*ir.Tensor]*ir.Tensor{}
		for i, in := range inst.Inputs {
			orig[in] = p.Inst.Inputs[i]
		}
		bind = func(t *ir.Tensor) (Binding, error) { return p.Bind(orig[t]) }
	}
	b.claim(inst)
	b.k.source[t] = Source{Arg: -1, Stage: -1, Local: inst.Outputs[0]}
	for _, in := range inst.Inputs {
		bd, err := bind(in)
		if err != nil {
			return err
		}
		if err := b.bind(in, bd, stage); err != nil {
			return err
		}
	}
	return nil
}

// taken reports whether a tensor of inst is bound already, or about to
// be: inst itself was, or another instance sharing its tensors (the
// backward instances derived from one forward instance share its inputs).
func (b *builder) taken(inst *ir.Instance) bool {
	if b.bound[inst] {
		return true
	}
	for _, t := range inst.Inputs {
		if b.claimed[t] {
			return true
		}
	}
	for _, d := range inst.Locals {
		if b.claimed[d.Tensor] {
			return true
		}
	}
	return false
}

// argument makes the buffer bound to t an argument (once per buffer).
func (b *builder) argument(t *ir.Tensor) (Source, error) {
	key := b.buffers[t]
	shape, err := concrete(t)
	if err != nil {
		return Source{}, err
	}
	j, ok := b.argIndex[key]
	if !ok {
		j = len(b.k.Args)
		b.argIndex[key] = j
		b.k.Args = append(b.k.Args, Arg{Key: key, DType: t.DType, Shape: shape})
	} else if a := b.k.Args[j]; a.DType != t.DType || fmt.Sprint(a.Shape) != fmt.Sprint(shape) {
		return Source{}, fmt.Errorf("buffer %v read as %s%v and as %s%v", key, a.DType, a.Shape, t.DType, shape)
	}
	src := Source{Arg: j, Stage: -1}
	b.k.source[t] = src
	return src, nil
}

func concrete(t *ir.Tensor) ([]int64, error) {
	out := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		n, ok := d.IsConst()
		if !ok {
			return nil, fmt.Errorf("tensor %s has a symbolic shape %s: bind its symbols before compiling", t.Name, lang.ShapeString(t.Shape))
		}
		out[i] = n
	}
	return out, nil
}

// Product is the number of elements of shape.
func Product(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}
