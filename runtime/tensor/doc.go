// Package tensor is the concrete tensor value that every tofuc runtime (the
// reference interpreter, the .npy reader and writer, generated code's
// harness) exchanges.
//
// A Tensor is a dtype, a shape and its elements in row-major (C) order.
// Floating dtypes (f16, bf16, f32, f64) keep their elements in F as float64
// values already rounded to the dtype's precision; integer dtypes and bool
// keep theirs in I as int64 values already wrapped to the dtype's width
// (bool as 0 or 1, u64 as its two's complement bit pattern). Exactly one of
// F and I is non-nil for a tensor of non-zero size.
//
// Conversions follow TDL's cast rules (see FloatToInt and IntToFloat): a
// float becomes an integer by truncation toward zero and wrapping to the
// width (NaN and ±Inf give 0), anything becomes a bool by "!= 0".
package tensor
