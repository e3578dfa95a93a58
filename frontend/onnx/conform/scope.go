package conform

// Scope is the operator set this stage of tofuc is held to (the CNN and
// MLP operators); the importer supports more. A test is in scope when all
// its operators are, the constant ones (folded at import) included.
var Scope = setOf(
	// constants, folded at import
	"Constant", "ConstantOfShape", "Shape", "Size", "Range", "Cast", "CastLike",
	// convolution, pooling, matrices
	"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul",
	// element-wise arithmetic and math
	"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Exp", "Log", "Sqrt", "Pow", "Reciprocal", "Ceil", "Floor",
	"Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Acosh", "Atanh",
	"Erf", "Min", "Max", "Mean", "Sum", "Clip", "Where",
	"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor",
	// activations
	"Relu", "LeakyRelu", "PRelu", "Elu", "Celu", "Selu", "Sigmoid", "HardSigmoid", "HardSwish", "Softplus",
	"Softsign", "Gelu", "Mish", "Swish", "ThresholdedRelu", "Shrink", "Softmax", "LogSoftmax",
	// normalisation
	"BatchNormalization", "InstanceNormalization", "LayerNormalization", "RMSNormalization", "LRN",
	"MeanVarianceNormalization", "LpNormalization", "Dropout",
	// shapes and indexing
	"Identity", "Flatten", "Reshape", "Transpose", "Concat", "Split", "Slice", "Squeeze", "Unsqueeze",
	"Pad", "Tile", "Expand", "Gather", "Trilu", "CumSum", "Einsum", "ArgMax", "ArgMin",
)

func setOf(names ...string) map[string]bool {
	s := map[string]bool{}
	for _, n := range names {
		s[n] = true
	}
	return s
}

// inScope reports whether every operator of a test is in Scope.
func inScope(ops []string) bool {
	for _, op := range ops {
		if !Scope[op] {
			return false
		}
	}
	return len(ops) > 0
}
