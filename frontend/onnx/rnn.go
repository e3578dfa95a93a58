package onnx

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// recurrence is one of ONNX's recurrent operators, imported as the
// projection of every time step's input at once (one contraction per
// direction), then its stdlib step called once per time step and
// direction (the steps unrolled, so that every pass sees each step's
// structure).
type recurrence struct {
	step  string
	gates int // gate blocks of W and R
	// recurrentBias keeps R's bias in the step (the GRU's candidate gate
	// multiplies it by the reset gate), not in the projection.
	recurrentBias bool
	// activations are the default activation of each slot of the cell.
	activations []string
	// states name the cell's states: h, and the LSTM's c.
	states []string
	// flag is the operator's boolean attribute, passed to the cell.
	flag string
}

var (
	lstmRec = recurrence{step: "lstm_step", gates: 4, activations: []string{"sigmoid", "tanh", "tanh"}, states: []string{"h", "c"}, flag: "input_forget"}
	gruRec  = recurrence{step: "gru_step", gates: 3, recurrentBias: true, activations: []string{"sigmoid", "tanh"}, states: []string{"h"}, flag: "linear_before_reset"}
	rnnRec  = recurrence{step: "rnn_step", gates: 1, activations: []string{"tanh"}, states: []string{"h"}}
)

// activationParams lists ONNX's recurrent activations with the default
// alpha and beta of those that take them, as ONNX Runtime reads them:
// activation_alpha and activation_beta are consumed in order by the
// activations that use them.
var activationParams = map[string]struct {
	alpha, beta         float64
	usesAlpha, usesBeta bool
}{
	"sigmoid": {}, "tanh": {}, "relu": {}, "softsign": {}, "softplus": {},
	"affine":          {alpha: 1, usesAlpha: true, usesBeta: true},
	"leakyrelu":       {alpha: 0.01, usesAlpha: true},
	"thresholdedrelu": {alpha: 1, usesAlpha: true},
	"scaledtanh":      {alpha: 1, beta: 1, usesAlpha: true, usesBeta: true},
	"hardsigmoid":     {alpha: 0.2, beta: 0.5, usesAlpha: true, usesBeta: true},
	"elu":             {alpha: 1, usesAlpha: true},
}

// layer is what every direction of a recurrent node shares.
type layer struct {
	rec           recurrence
	x             *value // the input sequence, time axis first: [T, B, I]
	batchMajor    bool   // layout 1: X, Y and the states batch first
	steps, hidden int64
	batch         lang.Dim
	// lens are the sequence lengths [B] and running = sequence_mask(lens)
	// [T, B, 1]; nil when every sequence has all the steps.
	lens, running *value
	reverse       []bool   // per direction
	attrs         [][]attr // the cell's, per direction
}

// convRecurrent maps LSTM, GRU and RNN: each direction is its cell
// unrolled over the time steps (reverse runs them backwards). With
// sequence_lens, a step past a sequence's end keeps its state and
// outputs zeros; a reverse direction then reads each sequence from its
// own last step (reverse_sequence).
func convRecurrent(r recurrence) func(*nodeCtx) {
	return func(c *nodeCtx) {
		l := c.layer(r)
		var ys, finals [][]*value // per direction: the outputs per step, the final states
		if l.stackable() {
			ys, finals = c.bothDirections(l)
		}
		for d := len(ys); d < len(l.reverse); d++ {
			y, final := c.direction(l, d)
			ys, finals = append(ys, y), append(finals, final)
		}
		if c.wants(0) {
			y := c.concatAll(c.stackSteps(l, ys), 1) // [T, D, B, H]
			if l.batchMajor {
				y = c.call1("transpose", []attr{intsA("perm", []int64{2, 0, 1, 3})}, y)
			}
			c.out(0, y)
		}
		for s := range r.states {
			if !c.wants(1 + s) {
				continue
			}
			var perDir []*value
			for _, f := range finals {
				perDir = append(perDir, c.call1("unsqueeze", []attr{intsA("axes", []int64{0})}, f[s]))
			}
			y := c.concatAll(perDir, 0) // [D, B, H]
			if l.batchMajor {
				y = c.call1("transpose", []attr{intsA("perm", []int64{1, 0, 2})}, y)
			}
			c.out(1+s, y)
		}
	}
}

// stackSteps stacks each direction's step outputs [B, H] into
// [T, 1, B, H], undoing the per-sequence reversal of a reverse direction
// with lengths.
func (c *nodeCtx) stackSteps(l *layer, ys [][]*value) []*value {
	out := make([]*value, len(ys))
	for d, steps := range ys {
		var rows []*value
		for _, y := range steps {
			rows = append(rows, c.call1("unsqueeze", []attr{intsA("axes", []int64{0})}, y))
		}
		seq := c.concatAll(rows, 0) // [T, B, H]
		if l.reverse[d] && l.lens != nil {
			seq = c.call1("reverse_sequence", nil, seq, l.lens)
		}
		out[d] = c.call1("unsqueeze", []attr{intsA("axes", []int64{1})}, seq)
	}
	return out
}

// layer reads the node's shapes and attributes.
func (c *nodeCtx) layer(r recurrence) *layer {
	x, W, R := c.must(0), c.must(1), c.must(2)
	if rank(x) != 3 || rank(W) != 3 || rank(R) != 3 {
		c.fail("X, W and R must be 3-D, found ranks %d, %d and %d", rank(x), rank(W), rank(R))
	}
	batchMajor := c.intAttr("layout", 0) != 0
	if batchMajor {
		x = c.call1("transpose", []attr{intsA("perm", []int64{1, 0, 2})}, x)
	}
	steps, ok := x.typ.Shape[0].IsConst()
	if !ok {
		c.fail("the number of time steps is symbolic (%s); it must be known, the steps being unrolled", x.typ.Shape[0])
	}
	l := &layer{rec: r, x: x, batchMajor: batchMajor, steps: steps, hidden: c.extent(R, 2), batch: x.typ.Shape[1]}
	if hs := c.intAttr("hidden_size", l.hidden); hs != l.hidden {
		c.fail("hidden_size = %d, but R is %s", hs, lang.ShapeString(R.typ.Shape))
	}
	switch dir := c.stringAttr("direction", "forward"); dir {
	case "forward":
		l.reverse = []bool{false}
	case "reverse":
		l.reverse = []bool{true}
	case "bidirectional":
		l.reverse = []bool{false, true}
	default:
		c.fail("direction = %q", dir)
	}
	if n := c.extent(W, 0); n != int64(len(l.reverse)) {
		c.fail("W has %d directions, direction %q needs %d", n, c.stringAttr("direction", "forward"), len(l.reverse))
	}
	// At least a step's input and its cell per step and direction.
	if err := c.imp.reserveCalls(2 * int(min(steps, MaxCalls)) * len(l.reverse)); err != nil {
		c.fail("unrolling %d steps: %v", steps, err)
	}
	if l.lens = c.sequenceLengths(l.steps); l.lens != nil {
		l.running = named(c.call1("sequence_mask", []attr{intA("steps", l.steps)}, l.lens), "running")
	}
	l.attrs = c.cellAttrs(r, len(l.reverse))
	return l
}

// sequenceLengths is sequence_lens, or nil when it is absent or known to
// give every sequence all the steps.
func (c *nodeCtx) sequenceLengths(steps int64) *value {
	lens := c.in(4)
	if lens == nil {
		return nil
	}
	if lens.konst != nil {
		full := true
		for i := range lens.konst.Len() {
			full = full && int64(lens.konst.Flat(i)) == steps
		}
		if full {
			return nil
		}
	}
	return lens
}

// cellAttrs are the cell's attributes for each direction: clip, the
// LSTM's input_forget, the GRU's linear_before_reset, and the
// activations with their alpha and beta.
func (c *nodeCtx) cellAttrs(r recurrence, dirs int) [][]attr {
	var common []attr
	if c.has("clip") {
		common = append(common, floatA("clip", c.floatAttr("clip", 0)))
	}
	if r.flag != "" && c.intAttr(r.flag, 0) != 0 {
		common = append(common, boolA(r.flag, true))
	}
	names := c.stringsAttr("activations")
	if names == nil {
		return repeat(common, dirs) // the cell's defaults
	}
	slots := len(r.activations)
	if len(names) != slots*dirs {
		c.fail("%d activations, expected %d (%d per direction)", len(names), slots*dirs, slots)
	}
	alphas, betas := c.floatsAttr("activation_alpha"), c.floatsAttr("activation_beta")
	out := make([][]attr, dirs)
	for d := range dirs {
		list, alpha, beta := listA(), listA(), listA()
		for _, name := range names[d*slots : (d+1)*slots] {
			name = strings.ToLower(name)
			p, ok := activationParams[name]
			if !ok {
				c.fail("activation %q", name)
			}
			a, b := p.alpha, p.beta
			if p.usesAlpha && len(alphas) > 0 {
				a, alphas = alphas[0], alphas[1:]
			}
			if p.usesBeta && len(betas) > 0 {
				b, betas = betas[0], betas[1:]
			}
			list.List = append(list.List, ir.AttrValue{Kind: ir.AttrString, Str: name})
			alpha.List = append(alpha.List, ir.AttrValue{Kind: ir.AttrFloat, Float: a})
			beta.List = append(beta.List, ir.AttrValue{Kind: ir.AttrFloat, Float: b})
		}
		out[d] = append(append([]attr{}, common...), attr{"activations", list}, attr{"alpha", alpha}, attr{"beta", beta})
	}
	return out
}

func repeat(attrs []attr, n int) [][]attr {
	out := make([][]attr, n)
	for i := range out {
		out[i] = attrs
	}
	return out
}

func listA() ir.AttrValue { return ir.AttrValue{Kind: ir.AttrList, List: []ir.AttrValue{}} }

// direction unrolls direction d: it returns the output of each step in
// time order (for a reverse direction with lengths: in the order of each
// sequence reversed; none unless Y is wanted) and the final states.
func (c *nodeCtx) direction(l *layer, d int) (ys, final []*value) {
	xw, weights, states := c.directionInputs(l, d)
	for s, name := range l.rec.states {
		named(states[s], name)
	}
	reverse := l.reverse[d]
	for k := range l.steps {
		t := k
		if reverse && l.lens == nil {
			t = l.steps - 1 - k
		}
		xt := named(c.timeStep(xw, t), fmt.Sprintf("%s_%d", c.node.GetInput()[0], t))
		next := c.stepStates(l, c.call1(l.rec.step, l.attrs[d], append(append([]*value{xt}, states...), weights...)...))
		y := next[0]
		if l.lens != nil {
			// Steps past a sequence's end keep the state and output zeros.
			running := c.call1("take", []attr{intA("index", k)}, l.running)
			for s, name := range l.rec.states {
				next[s] = named(c.call1("where", nil, running, next[s], states[s]), name)
			}
			if c.wants(0) {
				y = c.call1("where", nil, running, y, scalar(l.x.typ.DType, 0))
			}
		}
		ys, states = append(ys, y), next
	}
	if reverse && l.lens == nil {
		slices.Reverse(ys)
	}
	return ys, states
}

// stackable says whether the layer's two directions can run as one stack
// (bothDirections): bidirectional, without sequence lengths (whose
// reverse direction reads each sequence from its own end), the same
// cell attributes both ways (one step takes one set).
func (l *layer) stackable() bool {
	return len(l.reverse) == 2 && l.lens == nil && reflect.DeepEqual(l.attrs[0], l.attrs[1])
}

// bothDirections unrolls a stackable layer's directions together: step k
// runs the forward direction's time k and the reverse direction's time
// T-1-k as one call of the step on a leading axis of 2 (the steps'
// *D), with both directions' weights stacked once. That halves the
// steps' launches, and each launch has twice the work to share among
// threads. It returns what direction does, for each direction.
func (c *nodeCtx) bothDirections(l *layer) (ys, finals [][]*value) {
	stack := func(a, b *value) *value { return c.call1("stack", nil, a, b) }
	take := func(v *value, i int64) *value { return c.call1("take", []attr{intA("index", i)}, v) }
	xw0, weights, states := c.directionInputs(l, 0)
	xw1, weights1, states1 := c.directionInputs(l, 1)
	for i := range weights {
		weights[i] = stack(weights[i], weights1[i])
	}
	for s, name := range l.rec.states {
		states[s] = named(stack(states[s], states1[s]), name)
	}
	// Step k's inputs are xs[k]: the forward direction's time k, the
	// reverse direction's time T-1-k.
	backwards := c.call1("slice", []attr{intsA("starts", []int64{-1}), intsA("ends", []int64{-l.steps - 1}), intsA("axes", []int64{0}), intsA("steps", []int64{-1})}, xw1)
	xs := c.call1("stack", []attr{intA("axis", 1)}, xw0, backwards)
	ys = make([][]*value, 2)
	for k := range l.steps {
		xt := named(c.timeStep(xs, k), fmt.Sprintf("%s_%d", c.node.GetInput()[0], k))
		states = c.stepStates(l, c.call1(l.rec.step, l.attrs[0], append(append([]*value{xt}, states...), weights...)...))
		for d := range ys {
			ys[d] = append(ys[d], take(states[0], int64(d)))
		}
	}
	slices.Reverse(ys[1])
	finals = make([][]*value, 2)
	for d := range finals {
		for _, st := range states {
			finals[d] = append(finals[d], take(st, int64(d)))
		}
	}
	return ys, finals
}

// directionInputs are direction d's projected input [T, B, G * H] (every
// step's at once, one contraction), the step's weights (R transposed,
// then the GRU's recurrent bias or the LSTM's peepholes), and the initial
// states.
func (c *nodeCtx) directionInputs(l *layer, d int) (xw *value, weights, states []*value) {
	dt, G, H := l.x.typ.DType, int64(l.rec.gates), l.hidden
	b := c.ofDirectionOr(3, d, zeros(dt, []int64{2 * G * H}))
	bias, recBias := c.rows(b, 0, G*H), c.rows(b, G*H, 2*G*H)
	weights = []*value{c.call1("transpose", []attr{intsA("perm", []int64{1, 0})}, c.ofDirection(2, d, false))}
	if l.rec.recurrentBias {
		weights = append(weights, recBias)
	} else {
		bias = c.call1("add", nil, bias, recBias)
	}
	states = []*value{c.initialState(l, 5, d)}
	if len(l.rec.states) == 2 {
		states = append(states, c.initialState(l, 6, d))
		weights = append(weights, c.ofDirectionOr(7, d, zeros(dt, []int64{3 * H})))
	}
	x := l.x
	if l.reverse[d] && l.lens != nil {
		x = c.call1("reverse_sequence", nil, x, l.lens)
	}
	W := c.call1("transpose", []attr{intsA("perm", []int64{1, 0})}, c.ofDirection(1, d, false))
	xw = named(c.call1("linear", nil, x, W, bias), fmt.Sprintf("%s_proj%d", c.node.GetInput()[0], d))
	return xw, weights, states
}

// timeStep is time t of the projected inputs xw [T, ...]: a slice of one
// step (a view of xw, where the plan allows) squeezed, so that the steps'
// kernels read it at the view's offset and are one kernel; a take would
// fold t into each step's code, a kernel per step (32 distinct copies of
// an LSTM's step, none of them in the instruction cache).
func (c *nodeCtx) timeStep(xw *value, t int64) *value {
	one := c.call1("slice", []attr{intsA("starts", []int64{t}), intsA("ends", []int64{t + 1}), intsA("axes", []int64{0})}, xw)
	return c.call1("squeeze", []attr{intsA("axes", []int64{0})}, one)
}

// stepStates splits a step's result into its states: the LSTM's step
// stacks h and c on the axis before the last.
func (c *nodeCtx) stepStates(l *layer, out *value) []*value {
	if len(l.rec.states) == 1 {
		return []*value{named(out, l.rec.states[0])}
	}
	axis := int64(rank(out) - 2)
	var states []*value
	for s, name := range l.rec.states {
		states = append(states, named(c.call1("take", []attr{intA("axis", axis), intA("index", int64(s))}, out), name))
	}
	return states
}

// named gives v an ONNX name (which the printer makes unique) if it has
// none.
func named(v *value, name string) *value {
	if v.onnx == "" {
		v.onnx = name
	}
	return v
}

// ofDirection is direction d of input i ([D, ...], or [B, D, ...] when
// batchMajor), named after it.
func (c *nodeCtx) ofDirection(i, d int, batchMajor bool) *value {
	attrs := []attr{intA("index", int64(d))}
	if batchMajor {
		attrs = append(attrs, intA("axis", 1))
	}
	return named(c.call1("take", attrs, c.must(i)), fmt.Sprintf("%s_%d", c.node.GetInput()[i], d))
}

// ofDirectionOr is ofDirection, or absent when input i is.
func (c *nodeCtx) ofDirectionOr(i, d int, absent *value) *value {
	if c.in(i) == nil {
		return absent
	}
	return c.ofDirection(i, d, false)
}

// initialState is direction d of the initial state input i ([D, B, H],
// or [B, D, H] batch-major), or zeros [B, H] when the node gives none.
func (c *nodeCtx) initialState(l *layer, i, d int) *value {
	if c.in(i) != nil {
		return c.ofDirection(i, d, l.batchMajor)
	}
	batch, ok := l.batch.IsConst()
	if !ok {
		c.fail("the batch extent is symbolic (%s): input %d (the initial state) is needed", l.batch, i)
	}
	return zeros(l.x.typ.DType, []int64{batch, l.hidden})
}

// rows is rows [from, to) of the 1-D v.
func (c *nodeCtx) rows(v *value, from, to int64) *value {
	return c.call1("slice", []attr{intsA("starts", []int64{from}), intsA("ends", []int64{to}), intsA("axes", []int64{0})}, v)
}
