package onnx

import (
	"tofuc/lang"
)

// Operators of recent sequence models: rotary embeddings, linear
// attention, the stateful causal convolution and the KV-cache scatter.

// convRotaryEmbedding maps RotaryEmbedding (opset 23) onto the stdlib's
// rotary_embedding over [B, H, S, D]: a 3-D input [B, S, H * D] is split
// into num_heads heads and merged back; with position_ids the caches are
// gathered at the positions ([P, R] -> [B, S, R]).
func convRotaryEmbedding(c *nodeCtx) {
	x, cos, sin := c.must(0), c.must(1), c.must(2)
	threeD := rank(x) == 3
	switch {
	case threeD:
		heads := c.intAttr("num_heads", 0)
		if heads <= 0 || c.extent(x, 2)%heads != 0 {
			c.fail("a 3-D input needs num_heads dividing its hidden size %d, found num_heads = %d", c.extent(x, 2), heads)
		}
		x = c.call1("split_heads", []attr{intA("heads", heads)}, x)
	case rank(x) != 4:
		c.fail("the input must be 3-D or 4-D, found rank %d", rank(x))
	}
	if pos := c.in(3); pos != nil {
		if rank(cos) != 2 || rank(sin) != 2 || rank(pos) != 2 {
			c.fail("with position_ids the caches must be 2-D and position_ids 2-D, found ranks %d, %d and %d", rank(cos), rank(sin), rank(pos))
		}
		cos = c.call1("gather", []attr{intA("axis", 0)}, cos, pos)
		sin = c.call1("gather", []attr{intA("axis", 0)}, sin, pos)
	} else if rank(cos) != 3 || rank(sin) != 3 {
		c.fail("without position_ids the caches must be 3-D [batch, sequence, rotary dim / 2], found ranks %d and %d", rank(cos), rank(sin))
	}
	head := c.extent(x, 3)
	dim := c.intAttr("rotary_embedding_dim", 0)
	if dim == 0 {
		dim = head
	}
	half := c.extent(cos, 2)
	if dim%2 != 0 || dim > head || half != dim/2 || c.extent(sin, 2) != half {
		c.fail("rotary dimension %d of heads of %d needs caches of %d channels, found %d and %d", dim, head, dim/2, half, c.extent(sin, 2))
	}
	var attrs []attr
	if c.intAttr("interleaved", 0) != 0 {
		attrs = append(attrs, boolA("interleaved", true))
	}
	y := c.call1("rotary_embedding", attrs, x, cos, sin)
	if threeD {
		y = c.call1("merge_heads", nil, y)
	}
	c.out(0, y)
}

// convCausalConvWithState maps CausalConvWithState (opset 27) onto the
// stdlib's causal_conv_with_state; absent bias and past_state are zeros.
func convCausalConvWithState(c *nodeCtx) {
	x, w := c.must(0), c.must(1)
	if rank(x) != 3 || rank(w) != 3 {
		c.fail("input and weight must be 3-D, found ranks %d and %d", rank(x), rank(w))
	}
	dt := x.typ.DType
	channels, k := c.extent(x, 1), c.extent(w, 2)
	if c.extent(w, 0) != channels || c.extent(w, 1) != 1 {
		c.fail("weight %s is not the depthwise (channels = %d, 1, k)", lang.ShapeString(w.typ.Shape), channels)
	}
	var attrs []attr
	switch act := c.stringAttr("activation", "none"); act {
	case "none":
	case "silu", "swish":
		attrs = append(attrs, boolA("silu", true))
	default:
		c.fail("activation = %q (none, silu and swish are defined)", act)
	}
	bias := c.in(2)
	if bias == nil {
		bias = zeros(dt, []int64{channels})
	}
	state := c.in(3)
	if state == nil {
		state = zeros(dt, []int64{c.extent(x, 0), channels, k - 1})
	} else if rank(state) != 3 || c.extent(state, 2) != k-1 {
		c.fail("past_state %s must be (batch, channels, k - 1 = %d)", lang.ShapeString(state.typ.Shape), k-1)
	}
	outs := c.call("causal_conv_with_state", attrs, x, w, bias, state)
	c.out(0, outs[0])
	c.out(1, outs[1])
}

// convTensorScatter maps TensorScatter (opset 24) onto the stdlib's
// tensor_scatter; absent write_indices are zeros.
func convTensorScatter(c *nodeCtx) {
	cache, update := c.must(0), c.must(1)
	if rank(cache) != rank(update) {
		c.fail("past_cache and update must have the same rank, found %d and %d", rank(cache), rank(update))
	}
	axis := c.axis(c.intAttr("axis", -2), rank(cache))
	if axis == 0 {
		c.fail("axis 0 is the batch axis; the sequence axis must be another")
	}
	attrs := []attr{intA("axis", axis)}
	switch mode := c.stringAttr("mode", "linear"); mode {
	case "linear":
	case "circular":
		attrs = append(attrs, boolA("circular", true))
	default:
		c.fail("mode = %q (linear and circular are defined)", mode)
	}
	idx := c.in(2)
	if idx == nil {
		idx = zeros(lang.I64, []int64{c.extent(cache, 0)})
	}
	c.out(0, c.call1("tensor_scatter", attrs, cache, update, idx))
}

// convLinearAttention maps LinearAttention (opset 27): the packed
// [B, T, H * D] inputs are split into heads, computed in f32 (as ONNX's
// definition does), and the recurrence unrolled over the T tokens, one
// linear_attention_step and one linear_attention_read per token.
func convLinearAttention(c *nodeCtx) {
	q, k, v := c.must(0), c.must(1), c.must(2)
	if rank(q) != 3 || rank(k) != 3 || rank(v) != 3 {
		c.fail("query, key and value must be 3-D (B, T, H * D), found ranks %d, %d and %d", rank(q), rank(k), rank(v))
	}
	qHeads, kvHeads := c.intAttr("q_num_heads", 0), c.intAttr("kv_num_heads", 0)
	if qHeads <= 0 || kvHeads <= 0 || qHeads%kvHeads != 0 {
		c.fail("q_num_heads (%d) must be a positive multiple of kv_num_heads (%d)", qHeads, kvHeads)
	}
	rule := c.stringAttr("update_rule", "gated_delta")
	var gated, delta bool
	switch rule {
	case "linear":
	case "gated":
		gated = true
	case "delta":
		delta = true
	case "gated_delta":
		gated, delta = true, true
	default:
		c.fail("update_rule = %q (linear, gated, delta and gated_delta are defined)", rule)
	}
	outType := q.typ.DType
	if !outType.IsFloat() {
		c.fail("query is %s; it must be a float", outType)
	}
	steps := c.extent(q, 1)
	if c.extent(q, 2)%qHeads != 0 || c.extent(k, 2)%kvHeads != 0 || c.extent(v, 2)%kvHeads != 0 {
		c.fail("the last axes of query %s, key %s and value %s do not split into %d, %d and %d heads",
			lang.ShapeString(q.typ.Shape), lang.ShapeString(k.typ.Shape), lang.ShapeString(v.typ.Shape), qHeads, kvHeads, kvHeads)
	}
	dk, dv := c.extent(q, 2)/qHeads, c.extent(v, 2)/kvHeads
	if c.extent(k, 2)/kvHeads != dk {
		c.fail("key heads of %d channels, query heads of %d", c.extent(k, 2)/kvHeads, dk)
	}
	f32 := func(x *value) *value { return c.cast(x, lang.F32) }
	heads := func(x *value, n int64) *value { return c.call1("split_heads", []attr{intA("heads", n)}, f32(x)) }
	q4, k4, v4 := named(heads(q, qHeads), "q"), named(heads(k, kvHeads), "k"), named(heads(v, kvHeads), "v")
	unused := zeros(lang.F32, []int64{1, 1, 1, 1})
	g, beta := unused, unused
	decay, betaIn := c.in(4), c.in(5)
	switch {
	case gated != (decay != nil):
		c.fail("update_rule %q %s the decay input", rule, map[bool]string{true: "needs", false: "takes no"}[gated])
	case delta != (betaIn != nil):
		c.fail("update_rule %q %s the beta input", rule, map[bool]string{true: "needs", false: "takes no"}[delta])
	}
	if gated {
		if rank(decay) != 3 || c.extent(decay, 2) != kvHeads && c.extent(decay, 2) != kvHeads*dk {
			c.fail("decay %s must be (B, T, kv_num_heads) or (B, T, kv_num_heads * d_k)", lang.ShapeString(decay.typ.Shape))
		}
		g = named(heads(decay, kvHeads), "decay")
	}
	if delta {
		if rank(betaIn) != 3 || c.extent(betaIn, 2) != kvHeads && c.extent(betaIn, 2) != 1 {
			c.fail("beta %s must be (B, T, kv_num_heads) or (B, T, 1)", lang.ShapeString(betaIn.typ.Shape))
		}
		beta = named(heads(betaIn, c.extent(betaIn, 2)), "beta")
	}
	stateType := outType
	s := c.in(3)
	if s == nil {
		s = zeros(lang.F32, []int64{c.extent(q, 0), kvHeads, dk, dv})
	} else {
		stateType = s.typ.DType
		s = f32(s)
	}
	if err := c.imp.reserveCalls(2 * int(min(steps, MaxCalls))); err != nil {
		c.fail("unrolling %d steps: %v", steps, err)
	}
	var stepAttrs []attr
	if gated {
		stepAttrs = append(stepAttrs, boolA("gated", true))
	}
	if delta {
		stepAttrs = append(stepAttrs, boolA("delta", true))
	}
	var readAttrs []attr
	if qHeads != kvHeads {
		readAttrs = append(readAttrs, intA("groups", qHeads/kvHeads))
	}
	if sc := c.floatAttr("scale", 0); sc != 0 {
		readAttrs = append(readAttrs, floatA("scale", sc))
	}
	var outs []*value
	for t := range steps {
		at := []attr{intA("step", t)}
		s = c.call1("linear_attention_step", append(at, stepAttrs...), s, k4, v4, g, beta)
		outs = append(outs, c.call1("linear_attention_read", append(at, readAttrs...), q4, s))
	}
	if len(outs) == 0 {
		c.fail("the sequence is empty")
	}
	y := c.call1("merge_heads", nil, c.concatAll(outs, 2))
	c.out(0, c.cast(y, outType))
	c.out(1, c.cast(s, stateType))
}
