// Package smt verifies rewrite rules (`rule NAME(vars): lhs == rhs`) from
// the TDL semantics of both sides, with Z3 (github.com/aclements/go-z3)
// and the reference interpreter; docs/rules.md states what each verdict
// promises.
//
// Both sides are expanded by inlining every operator lambda into its
// consumer, down to reads of the rule's variables, and put in a normal
// form: a sum of terms, each a rational coefficient times a guard (a
// conjunction of integer conditions on shape symbols, output indices and
// summation variables) times a sum over summation variables of a product
// of atoms. Atoms are reads of the rule's inputs at integer index
// expressions, uninterpreted functions of normal forms (max, exp, the
// reciprocal, comparisons, integer wraps, float roundings, ...),
// max/min/prod reductions and integer indices used as values. Index
// arithmetic is wrapped to its dtype as the interpreter does.
//
// A rule is decided under one deadline (Options.Timeout): first where the
// sides fail in the interpreter is compared, node by node (domain.go);
// the interpreter runs them at random shapes beyond the bounds the rule's
// constants need (need.go, probe.go); then the normal form of lhs - rhs
// is shown to be zero for all shapes (prove.go, match.go): terms equal up
// to renaming merge, terms whose guard cannot hold are dropped, terms
// that differ only by disjoint guards join, and every remaining term must
// cancel a term of opposite coefficient after a bijective change of its
// summation variables. Otherwise the rule is **bounded** when every shape
// within the bounds passes the bounded check (bounded.go): both sides
// unrolled into canonical polynomials over the input elements (ground.go,
// gpoly.go), identical ones equal, Z3 asked for inputs that separate the
// others. A difference is **refuted** only when the interpreter confirms
// it; anything else is **unknown** with its reason.
package smt
