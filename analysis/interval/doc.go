// Package interval bounds index expressions of the lambda IR with symbolic
// intervals: [Lo, Hi] (both inclusive) where each bound is a lang.Dim, an
// integer polynomial over shape symbols in canonical form, so affine bounds
// carry their own constants (`x + dx` over x in [p, p+n-1] and dx in
// [0, DW-1] gives [p, p+n+DW-2]). Negative multipliers swap the bounds,
// subtraction pairs each bound with the other's opposite, and floor
// division and remainder by constants are exact where the bounds allow and
// conservative otherwise. What cannot be bounded is an error, never a guess.
package interval
