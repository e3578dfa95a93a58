// Package exec is tofuc's one executor of model graphs: it binds a
// graph's shape symbols, checks its inputs, looks up or initialises its
// parameters, runs it on a Backend, and checks its outputs. Backends are
// the reference interpreter (Interp, the oracle) and the compiled runtimes
// (codegen/backend: cpu, simt); each gets a graph whose shapes are bound
// and runs it, nothing else.
//
// Run binds the graph's shape symbols from the actual shapes of its
// inputs, looks up or initialises every parameter, then runs the graph on
// the backend. The result holds the graph outputs by name and every
// parameter actually used (given or initialised), so that a caller can
// save them. Every output is checked against its Value's dtype and shape.
// A Session keeps what a backend prepared (a compiled plan) across runs
// with the same shapes, as a training loop or a benchmark makes them.
//
// The interpreter backend evaluates the nodes in order: each node's
// instance on its input values, a Value with a Const being a rank-0
// tensor of its dtype. A node's instance has its symbols bound from its
// actual inputs first and from the graph's symbols for the rest.
// Intermediate values are dropped after their last use.
//
// A parameter missing from the params argument is initialised by InitParam,
// deterministically from (seed, parameter name) and independently of the
// order of parameters: a PCG generator (math/rand/v2) seeded with the seed
// and the FNV-1a hash of the name. Kinds and their Args: "normal" (mean,
// std; default 0, 0.02), "uniform" (low, high; default -0.05, 0.05),
// "zeros", "ones", "const" (value), "glorot" (uniform in ±sqrt(6/(fan_in +
// fan_out))) and "he" (normal with std sqrt(2/fan_in)). The fans follow
// PyTorch's convention for a weight laid out [out, in, k...]: for rank >=
// 2, fan_in = shape[1]·prod(shape[2:]) and fan_out = shape[0]·prod(shape[2:]);
// for rank 1 both are shape[0]; for rank 0 both are 1 (a zero fan counts as
// 1).
package exec
