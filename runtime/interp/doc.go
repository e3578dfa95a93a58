// Package interp is tofuc's reference interpreter: it evaluates lambda-IR
// instances and model graphs on concrete tensors. It is the oracle that the
// code generator's output is tested against, so its semantics are written
// down here in full.
//
// # Instances
//
// EvalInstance binds the instance's inputs by position (dtype and rank must
// match; each dimension must equal its declared Dim). Shape symbols are
// bound from the syms argument and, when missing there, solved from the
// actual input shapes (a dimension that is a constant multiple of one
// unbound symbol plus bound terms, e.g. N or 2*N+1, binds it); a symbol that
// would need two different values is an error. It then evaluates the Locals
// in order, each Def materialised as a tensor, then the Outputs, and returns
// the outputs.
//
// A Def is evaluated for every index tuple of its Vars; the element is the
// Body converted to the tensor's dtype as by Cast below (floats rounded with
// DType.RoundFloat, a float stored into an integer tensor truncated toward
// zero and wrapped, NaN and ±Inf giving 0; anything stored into a bool
// tensor is "!= 0"). Elements are independent, so the order in which they
// are computed does not matter; the interpreter splits each Def's index
// space among GOMAXPROCS goroutines.
//
// # Expressions
//
// Float arithmetic is carried out in float64 inside an expression: values
// are rounded only when stored into a tensor (and at an explicit Cast to a
// float dtype, see below). Integer and bool values are carried as int64,
// wrapped to their dtype's width (u64 as its bit pattern).
//
//   - Const: a float constant is its Float, not rounded to T; an integer or
//     bool constant is its Int wrapped to T.
//   - Size: the Dim evaluated with the bound shape symbols.
//   - VarRef: the index variable's current value.
//   - Binary: both operands are evaluated in the domain of
//     lang.Promote(L.Type(), R.Type()): float64 when that is a float dtype,
//     int64 otherwise. Integer +, -, * and / are wrapped to T (C-like
//     overflow for T's width); / and % truncate toward zero as in C, and
//     integer division or remainder by zero yields 0. In the u64 domain,
//     /, % and the comparisons are unsigned. Comparisons yield a bool (0 or
//     1); && and || treat their operands as "!= 0" and short-circuit. When
//     T differs from the operand domain (e.g. a float result of integer
//     operands) the result is converted implicitly (see below).
//   - Unary: "-" negates (wrapping to T for integers); "!" is "== 0".
//   - Access: each index is evaluated; when one lies outside [0, extent) of
//     its dimension the access yields Default when Default is not nil, and
//     otherwise the whole evaluation fails with an error naming the
//     position, the tensor, the dimension and the index.
//   - Select: C is evaluated ("!= 0"), then only the chosen branch.
//   - Cast: float to float rounds to T (RoundFloat); int to float is exact
//     in float64 (then rounded to T); float to int truncates toward zero
//     then wraps to T, NaN and ±Inf giving 0 (what C leaves undefined);
//     int to int wraps to T; anything to bool is "!= 0".
//   - Implicit conversions (a Select branch, a Reduce body or a Call
//     argument whose dtype differs from what the node works in, a
//     Default whose dtype differs from its tensor's) follow Cast except
//     that floats are never rounded.
//   - Call: exp log sqrt rsqrt (1/sqrt) tanh sigmoid (1/(1+exp(-x))) erf
//     abs sin cos tan asin acos atan sinh cosh asinh acosh atanh floor
//     ceil round (half to even, as ONNX and NumPy) sign (NaN for NaN)
//     reciprocal isnan isinf pow max min atan2, computed in float64 as Go's
//     math package does. max and min propagate NaN. When every argument is
//     an integer or bool, abs, max, min and sign are computed on integers
//     (abs wraps: abs(i8 -128) is -128); every other function converts its
//     arguments to float64. isnan and isinf of an integer are false.
//   - Call of a bit function (ir.BitFuncs): bitand, bitor, bitxor,
//     bitnot, shl and shr on integers of the call's dtype, as
//     ir.IntBitFunc computes them; bitcast reads the bit pattern of its
//     argument (a float rounded to its dtype first, ir.BitsOf) as the
//     call's dtype (ir.FromBits).
//   - Reduce: the identity (sum 0, prod 1, max -Inf or the smallest value
//     of an integer T, min +Inf or the largest) combined with Body for
//     every tuple of Vars in row-major order (first var outermost), in
//     float64 or int64 (wrapped to T at the end, which equals wrapping at
//     every step). Float max and min propagate NaN. An empty range gives
//     the identity.
//   - Opaque: each View is materialised as a tensor (its tensor with the
//     non-nil Index entries fixed, the nil entries kept whole, in order; a
//     fixed index out of range is an error), the registered function is
//     called on the views, its result checked against Opaque.Shape, and
//     element Index of the result read (out of range is an error). Results
//     are cached for the duration of one EvalInstance call, keyed by the
//     fixed index values, so a batched function computes each slice once. Built-ins: cholesky
//     (lower-triangular L with A = L·Lᵀ, reading only the lower triangle of
//     A; an error unless A is positive definite) and inverse (Gauss-Jordan
//     elimination with partial pivoting; an error when a pivot is exactly
//     zero). Both return f64 tensors. See RegisterOpaque.
//
// # Graphs
//
// Model graphs run through runtime/exec, the one executor (shape
// binding, parameters, output checks), with the interpreter as one of its
// backends: exec.Interp evaluates the nodes in order with EvalNode.
//
// # Implementation
//
// Each Def is compiled once per evaluation into Go closures over a frame
// holding the current values of the index variables. Index expressions that
// are affine in the variables (VarRef, integer Const, Size, +, -, and * by a
// constant, all in i64) are compiled to a base plus coefficients; the
// dimensions of an Access whose affine index provably stays in range (from
// the variables' extents) are folded into one flat offset and need no
// bounds check.
package interp
