package onnx

import (
	"math"

	"tofuc/lang"
)

// convAttention maps ONNX Attention (opsets 23 and 24) onto the stdlib's
// attention_weights and attention_values. 3-D inputs [B, S, heads * D]
// are split into heads (split_heads) and the output merged back
// (merge_heads); past keys and values are concatenated before the new
// ones (the present outputs); grouped-query heads are the operators'
// groups attribute (query head h reads key head h / groups, as ONNX's
// function repeats each key head); the mask, nonpad_kv_seqlen and, with
// nonpad_kv_seqlen, the causal mask become one additive bias.
func convAttention(c *nodeCtx) {
	q, k, v := c.must(0), c.must(1), c.must(2)
	threeD := rank(q) == 3
	switch {
	case rank(q) != rank(k) || rank(q) != rank(v) || rank(q) != 3 && rank(q) != 4:
		c.fail("Q, K and V must all be 3-D or all 4-D, found ranks %d, %d and %d", rank(q), rank(k), rank(v))
	case threeD:
		q = named(c.call1("split_heads", []attr{intA("heads", c.intAttr("q_num_heads", 0))}, q), "q")
		kvHeads := []attr{intA("heads", c.intAttr("kv_num_heads", 0))}
		k, v = named(c.call1("split_heads", kvHeads, k), "k"), named(c.call1("split_heads", kvHeads, v), "v")
	}
	past := int64(0)
	if pk, pv := c.in(4), c.in(5); pk != nil || pv != nil {
		if pk == nil || pv == nil {
			c.fail("past_key and past_value go together")
		}
		past = c.extent(pk, 2)
		k = c.call1("concat", []attr{intA("axis", 2)}, pk, k)
		v = c.call1("concat", []attr{intA("axis", 2)}, pv, v)
	}
	c.out(1, k)
	c.out(2, v)
	qHeads, kvHeads := c.extent(q, 1), c.extent(k, 1)
	if kvHeads == 0 || qHeads%kvHeads != 0 || c.extent(v, 1) != kvHeads {
		c.fail("%d query heads do not group over %d key and %d value heads", qHeads, kvHeads, c.extent(v, 1))
	}
	var groups []attr // printed where they differ from the operators' defaults
	if qHeads != kvHeads {
		groups = []attr{intA("groups", qHeads/kvHeads)}
	}
	attrs := append([]attr{}, groups...)
	for _, name := range []string{"scale", "softcap"} {
		if c.has(name) {
			attrs = append(attrs, floatA(name, c.floatAttr(name, 0)))
		}
	}
	causal := c.intAttr("is_causal", 0) != 0
	if causal && c.in(6) == nil { // with nonpad_kv_seqlen, the bias masks
		attrs = append(attrs, boolA("causal", true), intA("past", past))
	}
	bias := c.attentionBias(q, k, causal)
	w := named(c.call1("attention_weights", attrs, q, k, bias), "weights")
	y := c.call1("attention_values", groups, w, v)
	if threeD {
		y = c.call1("merge_heads", nil, y)
	}
	c.out(0, y)
	if !c.wants(3) {
		return
	}
	switch mode := c.intAttr("qk_matmul_output_mode", 0); mode {
	case 3:
		c.out(3, w)
	case 0, 1, 2:
		c.out(3, c.call1("attention_weights", append(attrs, intA("stage", mode)), q, k, bias))
	default:
		c.fail("qk_matmul_output_mode = %d", mode)
	}
}

// attentionBias is the additive bias of an Attention node whose (head
// split, present) queries and keys are q [B, HQ, S, D] and k [B, HK, T, D]:
// the float mask, or 0 and -inf for a boolean one, padded with -inf to
// the T keys where it is shorter (opset 24), plus attention_length_bias
// of nonpad_kv_seqlen (which carries the causal mask when both are
// given); a scalar zero without either.
func (c *nodeCtx) attentionBias(q, k *value, causal bool) *value {
	dt := q.typ.DType
	mask, nonpad := c.in(3), c.in(6)
	var bias *value
	if mask != nil {
		bias = c.cast(mask, dt)
		if mask.typ.DType == lang.Bool {
			bias = c.call1("where", nil, mask, scalar(dt, 0), scalar(dt, math.Inf(-1)))
		}
		if short := c.extent(k, 2) - c.extent(bias, rank(bias)-1); short > 0 {
			pads := make([]int64, 2*rank(bias))
			pads[len(pads)-1] = short
			bias = c.call1("pad", []attr{intsA("pads", pads), floatA("value", math.Inf(-1))}, bias)
		}
	}
	if nonpad == nil {
		if bias == nil {
			return scalar(dt, 0)
		}
		return bias
	}
	lengths := c.call1("attention_length_bias", []attr{intA("queries", c.extent(q, 2)), intA("keys", c.extent(k, 2)),
		boolA("causal", causal)}, nonpad)
	lengths = c.cast(lengths, dt)
	if bias == nil {
		return lengths
	}
	return c.call1("add", nil, bias, lengths)
}

// convSwiGLU maps SwiGLU(a, b) = swish(a) * b.
func convSwiGLU(c *nodeCtx) {
	c.out(0, c.call1("swiglu", []attr{floatA("alpha", c.floatAttr("alpha", 1))}, c.must(0), c.must(1)))
}
