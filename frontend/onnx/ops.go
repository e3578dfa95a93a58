package onnx

import (
	"tofuc/lang"
)

// converter imports one ONNX operator. consts lists the input slots that
// must be known at import (shapes, axes, bounds): graph inputs found there
// are bound from Options.Known.
type converter struct {
	convert func(*nodeCtx)
	consts  []int
}

// converters maps ONNX operator types to their import. The simple ones
// map to one stdlib operator; docs/onnx.md lists them all.
var converters map[string]converter

func init() {
	converters = map[string]converter{
		"Identity":        {convert: convIdentity},
		"Constant":        {convert: convConstant},
		"ConstantOfShape": {convert: convConstantOfShape, consts: []int{0}},
		"Shape":           {convert: convShape},
		"Size":            {convert: convSize},
		"Range":           {convert: convRange, consts: []int{0, 1, 2}},
		"Cast":            {convert: convCast},
		"CastLike":        {convert: convCastLike},
		"Dropout":         {convert: convDropout, consts: []int{1, 2}},

		"QuantizeLinear":        {convert: convQuantizeLinear},
		"DequantizeLinear":      {convert: convDequantizeLinear},
		"DynamicQuantizeLinear": {convert: convDynamicQuantizeLinear},
		"MatMulInteger":         {convert: convMatMulInteger},
		"ConvInteger":           {convert: convConvInteger},
		"QLinearMatMul":         {convert: convQLinearMatMul},
		"QLinearConv":           {convert: convQLinearConv},

		"Conv":               {convert: convConv},
		"ConvTranspose":      {convert: convConvTranspose},
		"MaxPool":            {convert: convMaxPool},
		"AveragePool":        {convert: convAveragePool},
		"LpPool":             {convert: convLpPool},
		"GlobalAveragePool":  {convert: unary("global_avg_pool")},
		"GlobalMaxPool":      {convert: unary("global_max_pool")},
		"Gemm":               {convert: convGemm},
		"MatMul":             {convert: convMatMul},
		"Einsum":             {convert: convEinsum},
		"Det":                {convert: convDet},
		"DFT":                {convert: convDFT, consts: []int{1, 2}},
		"STFT":               {convert: convSTFT, consts: []int{1, 3}},
		"MelWeightMatrix":    {convert: convMelWeightMatrix, consts: []int{0, 1, 2, 3, 4}},
		"BatchNormalization": {convert: convBatchNorm},
		"InstanceNormalization": {convert: func(c *nodeCtx) {
			c.out(0, c.call1("instance_norm", []attr{floatA("epsilon", c.floatAttr("epsilon", 1e-5))}, c.must(0), c.must(1), c.must(2)))
		}},
		"LayerNormalization":        {convert: convLayerNorm},
		"GroupNormalization":        {convert: convGroupNorm},
		"RMSNormalization":          {convert: convRMSNorm},
		"LRN":                       {convert: convLRN},
		"MeanVarianceNormalization": {convert: convMVN},
		"LpNormalization": {convert: func(c *nodeCtx) {
			x := c.must(0)
			p := c.intAttr("p", 2)
			if p != 1 && p != 2 {
				c.fail("p = %d (only 1 and 2 are defined)", p)
			}
			c.out(0, c.call1("lp_normalization", []attr{intA("axis", c.axis(c.intAttr("axis", -1), rank(x))), intA("p", p)}, x))
		}},
		"Attention":                 {convert: convAttention},
		"LSTM":                      {convert: convRecurrent(lstmRec)},
		"GRU":                       {convert: convRecurrent(gruRec)},
		"RNN":                       {convert: convRecurrent(rnnRec)},
		"Softmax":                   {convert: softmaxLike("softmax")},
		"NegativeLogLikelihoodLoss": {convert: convNLLLoss},
		"SoftmaxCrossEntropyLoss":   {convert: convSoftmaxCrossEntropyLoss},
		"LogSoftmax":                {convert: softmaxLike("log_softmax")},
		"Hardmax":                   {convert: softmaxLike("hardmax")},

		"Add": {convert: binop("add")}, "Sub": {convert: binop("sub")},
		"Mul": {convert: binop("mul")}, "Div": {convert: binop("div")},
		"Pow":   {convert: convPow},
		"Mod":   {convert: convMod},
		"Equal": {convert: binop("equal")}, "Less": {convert: binop("less")},
		"LessOrEqual": {convert: binop("less_equal")}, "Greater": {convert: binop("greater")},
		"GreaterOrEqual": {convert: binop("greater_equal")},
		"And":            {convert: binop("and")}, "Or": {convert: binop("or")}, "Xor": {convert: binop("xor")},
		"Not":        {convert: unary("not")},
		"BitwiseAnd": {convert: binop("bitwise_and")}, "BitwiseOr": {convert: binop("bitwise_or")},
		"BitwiseXor": {convert: binop("bitwise_xor")}, "BitwiseNot": {convert: unary("bitwise_not")},
		"BitShift":       {convert: convBitShift},
		"BitCast":        {convert: convBitCast},
		"EyeLike":        {convert: convEyeLike},
		"HannWindow":     {convert: convWindow("hann_window"), consts: []int{0}},
		"HammingWindow":  {convert: convWindow("hamming_window"), consts: []int{0}},
		"BlackmanWindow": {convert: convWindow("blackman_window"), consts: []int{0}},
		"Where": {convert: func(c *nodeCtx) {
			c.out(0, c.call1("where", nil, c.must(0), c.must(1), c.must(2)))
		}},
		"Sum": {convert: variadic("add")}, "Min": {convert: variadic("min")}, "Max": {convert: variadic("max")},
		"Mean": {convert: convMean},

		"Neg": {convert: unary("neg")}, "Abs": {convert: unary("abs")}, "Exp": {convert: unary("exp")},
		"Log": {convert: unary("log")}, "Sqrt": {convert: unary("sqrt")}, "Reciprocal": {convert: unary("reciprocal")},
		"Ceil": {convert: unary("ceil")}, "Floor": {convert: unary("floor")}, "Round": {convert: unary("round")},
		"Sign": {convert: unary("sign")}, "Sin": {convert: unary("sin")}, "Cos": {convert: unary("cos")},
		"Tan": {convert: unary("tan")}, "Asin": {convert: unary("asin")}, "Acos": {convert: unary("acos")},
		"Atan": {convert: unary("atan")}, "Sinh": {convert: unary("sinh")}, "Cosh": {convert: unary("cosh")},
		"Asinh": {convert: unary("asinh")}, "Acosh": {convert: unary("acosh")}, "Atanh": {convert: unary("atanh")},
		"Erf": {convert: unary("erf")}, "IsNaN": {convert: unary("isnan")}, "IsInf": {convert: convIsInf},

		"Relu": {convert: unary("relu")}, "Sigmoid": {convert: unary("sigmoid")}, "Tanh": {convert: unary("tanh")},
		"Softplus": {convert: unary("softplus")}, "Softsign": {convert: unary("softsign")},
		"Mish": {convert: unary("mish")}, "HardSwish": {convert: unary("hard_swish")},
		"LeakyRelu":           {convert: withFloats("leaky_relu", "alpha", 0.01)},
		"Elu":                 {convert: withFloats("elu", "alpha", 1.0)},
		"Celu":                {convert: withFloats("celu", "alpha", 1.0)},
		"ThresholdedRelu":     {convert: withFloats("thresholded_relu", "alpha", 1.0)},
		"Selu":                {convert: withFloats("selu", "alpha", float32Value(1.6732632423543772), "gamma", float32Value(1.0507009873554805))},
		"HardSigmoid":         {convert: withFloats("hard_sigmoid", "alpha", 0.2, "beta", 0.5)},
		"Shrink":              {convert: withFloats("shrink", "bias", 0.0, "lambd", 0.5)},
		"PRelu":               {convert: binop("prelu")},
		"Gelu":                {convert: convGelu},
		"Swish":               {convert: convSwish},
		"SwiGLU":              {convert: convSwiGLU},
		"RotaryEmbedding":     {convert: convRotaryEmbedding},
		"LinearAttention":     {convert: convLinearAttention},
		"CausalConvWithState": {convert: convCausalConvWithState},
		"Clip":                {convert: convClip, consts: []int{1, 2}},

		"Flatten":   {convert: convFlatten},
		"Reshape":   {convert: convReshape, consts: []int{1}},
		"Transpose": {convert: convTranspose},
		"Concat":    {convert: convConcat},
		"Split":     {convert: convSplit, consts: []int{1}},
		"Slice":     {convert: convSlice, consts: []int{1, 2, 3, 4}},
		"Resize":    {convert: convResize, consts: []int{1, 2, 3}},
		"Squeeze":   {convert: convSqueeze, consts: []int{1}},
		"Unsqueeze": {convert: convUnsqueeze, consts: []int{1}},
		"Pad":       {convert: convPad, consts: []int{1, 2, 3}},
		"Tile":      {convert: convTile, consts: []int{1}},
		"Expand":    {convert: convExpand, consts: []int{1}},

		// Spatial and sampling operators (spatial.go).
		"DepthToSpace":  {convert: convDepthToSpace},
		"SpaceToDepth":  {convert: convSpaceToDepth},
		"CenterCropPad": {convert: convCenterCropPad, consts: []int{1}},
		"Col2Im":        {convert: convCol2Im, consts: []int{1, 2}},
		"GridSample":    {convert: convGridSample},
		"AffineGrid":    {convert: convAffineGrid, consts: []int{1}},
		"MaxUnpool":     {convert: convMaxUnpool, consts: []int{2}},
		"RoiAlign":      {convert: convRoiAlign},
		"DeformConv":    {convert: convDeformConv},

		"Gather": {convert: func(c *nodeCtx) {
			x := c.must(0)
			c.out(0, c.call1("gather", []attr{intA("axis", c.axis(c.intAttr("axis", 0), rank(x)))}, x, c.must(1)))
		}},
		"GatherElements": {convert: func(c *nodeCtx) {
			x := c.must(0)
			c.out(0, c.call1("gather_elements", []attr{intA("axis", c.axis(c.intAttr("axis", 0), rank(x)))}, x, c.must(1)))
		}},
		"ReverseSequence": {convert: convReverseSequence},
		"SplitToSequence": {convert: convSplitToSequence, consts: []int{1}},

		"If":                 {convert: convIf},
		"Loop":               {convert: convLoop, consts: []int{0, 1}},
		"Scan":               {convert: convScan},
		"SequenceEmpty":      {convert: convSequenceEmpty},
		"SequenceConstruct":  {convert: convSequenceConstruct},
		"SequenceInsert":     {convert: convSequenceInsert, consts: []int{2}},
		"SequenceAt":         {convert: convSequenceAt, consts: []int{1}},
		"SequenceErase":      {convert: convSequenceErase, consts: []int{1}},
		"SequenceLength":     {convert: convSequenceLength},
		"ConcatFromSequence": {convert: convConcatFromSequence},
		"SequenceMap":        {convert: convSequenceMap},
		"Optional":           {convert: convOptional},
		"OptionalHasElement": {convert: convOptionalHasElement},
		"OptionalGetElement": {convert: convOptionalGetElement},
		"Trilu":              {convert: convTrilu, consts: []int{1}},
		"CumSum":             {convert: cumulative("cumsum"), consts: []int{1}},
		"CumProd":            {convert: cumulative("cumprod"), consts: []int{1}},
		"TopK":               {convert: convTopK, consts: []int{1}},
		"ScatterElements":    {convert: convScatterElements},
		"Scatter":            {convert: convScatterElements},
		"ScatterND":          {convert: convScatterND},
		"GatherND":           {convert: convGatherND},
		"OneHot":             {convert: convOneHot, consts: []int{1}},
		"ArgMax":             {convert: argReduce("argmax")},
		"ArgMin":             {convert: argReduce("argmin")},
		"TensorScatter":      {convert: convTensorScatter},

		"ReduceSum":       {convert: reduce("reduce_sum", 13), consts: []int{1}},
		"ReduceMean":      {convert: reduce("reduce_mean", 18), consts: []int{1}},
		"ReduceMax":       {convert: reduce("reduce_max", 18), consts: []int{1}},
		"ReduceMin":       {convert: reduce("reduce_min", 18), consts: []int{1}},
		"ReduceProd":      {convert: reduce("reduce_prod", 18), consts: []int{1}},
		"ReduceL1":        {convert: reduce("reduce_l1", 18), consts: []int{1}},
		"ReduceL2":        {convert: reduce("reduce_l2", 18), consts: []int{1}},
		"ReduceSumSquare": {convert: reduce("reduce_sum_square", 18), consts: []int{1}},
		"ReduceLogSum":    {convert: reduce("reduce_log_sum", 18), consts: []int{1}},
		"ReduceLogSumExp": {convert: reduce("reduce_logsumexp", 18), consts: []int{1}},
	}
}

func convIdentity(c *nodeCtx) { c.out(0, c.must(0)) }

func unary(op string) func(*nodeCtx) {
	return func(c *nodeCtx) { c.out(0, c.call1(op, nil, c.must(0))) }
}

func binop(op string) func(*nodeCtx) {
	return func(c *nodeCtx) {
		a, b := c.must(0), c.must(1)
		c.out(0, c.call1(op, nil, a, c.legacyBroadcast(a, b)))
	}
}

// legacyBroadcast aligns b with a at the axis attribute, as binary
// operators before opset 7 did with broadcast = 1 (NumPy's rule aligns
// the last axes, which is the default axis): b gets trailing unit axes.
func (c *nodeCtx) legacyBroadcast(a, b *value) *value {
	if c.opset() >= 7 || c.intAttr("broadcast", 0) == 0 || !c.has("axis") {
		return b
	}
	axis := c.axis(c.intAttr("axis", 0), rank(a))
	extra := int64(rank(a)) - axis - int64(rank(b))
	if extra < 0 {
		c.fail("broadcast axis %d leaves no room for b of rank %d", axis, rank(b))
	}
	axes := make([]int64, extra)
	for i := range axes {
		axes[i] = int64(rank(b) + i)
	}
	if extra == 0 {
		return b
	}
	return c.call1("unsqueeze", []attr{intsA("axes", axes)}, b)
}

// variadic folds op over all inputs (ONNX Sum, Min, Max).
func variadic(op string) func(*nodeCtx) {
	return func(c *nodeCtx) { c.out(0, c.chain(op)) }
}

func (c *nodeCtx) chain(op string) *value {
	acc := c.must(0)
	for i := 1; i < c.numIn(); i++ {
		acc = c.call1(op, nil, acc, c.must(i))
	}
	return acc
}

func convMean(c *nodeCtx) {
	total := c.chain("add")
	c.out(0, c.call1("div", nil, total, scalar(total.typ.DType, float64(c.numIn()))))
}

// withFloats maps an operator whose attributes are floats with defaults,
// given as name, default pairs.
func withFloats(op string, nameDefaults ...any) func(*nodeCtx) {
	return func(c *nodeCtx) {
		var attrs []attr
		for i := 0; i < len(nameDefaults); i += 2 {
			name := nameDefaults[i].(string)
			attrs = append(attrs, floatA(name, c.floatAttr(name, nameDefaults[i+1].(float64))))
		}
		c.out(0, c.call1(op, attrs, c.must(0)))
	}
}

func convPow(c *nodeCtx) {
	base := c.must(0)
	y := c.call1("pow", nil, base, c.legacyBroadcast(base, c.must(1)))
	c.out(0, c.cast(y, base.typ.DType))
}

func convIsInf(c *nodeCtx) {
	neg, pos := c.intAttr("detect_negative", 1), c.intAttr("detect_positive", 1)
	x := c.must(0)
	inf := c.call1("isinf", nil, x)
	switch {
	case neg == 1 && pos == 1:
		c.out(0, inf)
	case neg == 1:
		c.out(0, c.call1("and", nil, inf, c.call1("less", nil, x, scalar(x.typ.DType, 0))))
	case pos == 1:
		c.out(0, c.call1("and", nil, inf, c.call1("greater", nil, x, scalar(x.typ.DType, 0))))
	default: // detects nothing: false everywhere (no value is both)
		c.out(0, c.call1("and", nil, inf, c.call1("isnan", nil, x)))
	}
}

func convGelu(c *nodeCtx) {
	switch a := c.stringAttr("approximate", "none"); a {
	case "none":
		c.out(0, c.call1("gelu", nil, c.must(0)))
	case "tanh":
		c.out(0, c.call1("gelu_tanh", nil, c.must(0)))
	default:
		c.fail("approximate = %q", a)
	}
}

// convSwish: x * sigmoid(alpha * x).
func convSwish(c *nodeCtx) {
	x := c.must(0)
	alpha := c.floatAttr("alpha", 1.0)
	if alpha == 1 {
		c.out(0, c.call1("silu", nil, x))
		return
	}
	s := c.call1("sigmoid", nil, c.call1("mul", nil, x, scalar(x.typ.DType, alpha)))
	c.out(0, c.call1("mul", nil, x, s))
}

func convClip(c *nodeCtx) {
	lo, hi := c.floatAttr("min", negInf), c.floatAttr("max", posInf)
	if c.opset() >= 11 {
		lo, hi = c.knownFloat(1, "minimum", negInf), c.knownFloat(2, "maximum", posInf)
	}
	c.out(0, c.call1("clip", []attr{floatA("min", lo), floatA("max", hi)}, c.must(0)))
}

// softmaxLike maps Softmax, LogSoftmax and Hardmax. Before opset 13 they
// worked on x coerced to 2-D at axis (default 1); that is a flatten, the
// operator on the last axis, and a reshape back.
func softmaxLike(op string) func(*nodeCtx) {
	return func(c *nodeCtx) {
		x := c.must(0)
		r := rank(x)
		if c.opset() >= 13 {
			c.out(0, c.call1(op, []attr{intA("axis", c.axis(c.intAttr("axis", -1), r))}, x))
			return
		}
		axis := c.axis(c.intAttr("axis", 1), r)
		if axis == int64(r-1) {
			c.out(0, c.call1(op, []attr{intA("axis", axis)}, x))
			return
		}
		flat := c.call1("flatten", []attr{intA("axis", axis)}, x)
		y := c.call1(op, []attr{intA("axis", 1)}, flat)
		c.out(0, c.call1("reshape", []attr{intsA("shape", c.dims(x))}, y))
	}
}

// cast converts v to dt with a stdlib cast (or folds it).
func (c *nodeCtx) cast(v *value, dt lang.DType) *value {
	if v.typ.DType == dt {
		return v
	}
	if v.konst != nil {
		return constValue("", castTensor(v.konst, dt), false)
	}
	op := "cast_" + dt.String()
	if c.imp.prog.StdOps()[op] == nil {
		c.fail("casts to %s are not supported", dt)
	}
	return c.call1(op, nil, v)
}

// convMod is stdlib mod, whose result on integers narrower than i64 is
// i64 (docs/stdlib.md), cast back to the inputs' type as ONNX's Mod
// gives it.
func convMod(c *nodeCtx) {
	a := c.must(0)
	y := c.call1("mod", []attr{intA("fmod", c.intAttr("fmod", 0))}, a, c.must(1))
	c.out(0, c.cast(y, a.typ.DType))
}
