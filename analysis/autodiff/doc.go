// Package autodiff derives backward operators from the lambda IR: for an
// instance y = f(x1, ..., xn) it builds the instance that maps the inputs
// and the gradient of each output to the gradient of each floating input,
// itself a plain lambda instance that every other pass reads.
//
// Each Def body is differentiated symbolically (reverse mode over the
// expression tree): every read of a tensor gets its coefficient, the
// product of the output's gradient and the partial derivative of the body
// with respect to that read. The coefficient is then scattered back to the
// tensor's index space by inverting the affine index maps: an index `v + r`
// is solved for v, which leaves the other variables as reductions and a
// guard that v stays in range; indices that cannot be inverted (data
// dependent, strided) keep the variables as reductions with an equality
// guard. Gradients flow through `let` locals in reverse order.
//
// max and min reductions send the gradient to every element equal to the
// result (all of them on ties); select sends it to the branch taken;
// functions without a useful derivative (floor, round, sign, comparisons)
// give zero. Opaque calls are not differentiable.
package autodiff
