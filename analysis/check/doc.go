// Package check resolves names, checks shapes and dtypes, and elaborates TDL
// into the lambda IR (tofuc/lang/ir).
//
// Operators are templates: rank-polymorphic shape patterns, attributes with
// defaults, compile-time shape functions. Instantiate specialises one to
// attribute values and input types, producing an ir.Instance whose lambdas
// have fixed ranks and whose index variables have known (possibly symbolic)
// extents. Models are run at compile time (loops, conditionals, blocks) into
// an ir.Graph of instances. Checking a file checks every operator on its own
// with symbolic shapes, every model with its default attributes, and both
// sides of every rule.
package check
