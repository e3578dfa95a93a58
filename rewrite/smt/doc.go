// Package smt verifies rewrite rules (`rule NAME(vars): lhs == rhs`) from
// the TDL semantics of both sides, with Z3 (github.com/aclements/go-z3).
//
// Both sides are expanded by inlining every operator lambda into its
// consumer, down to reads of the rule's variables, and put in a normal
// form: a sum of terms, each a rational coefficient times a guard (a
// conjunction of integer conditions on shape symbols, output indices and
// summation variables) times a sum over summation variables of a product
// of atoms. Atoms are reads of the rule's inputs at integer index
// expressions, uninterpreted functions of normal forms (max, exp, the
// reciprocal, comparisons, ...), max/min/prod reductions and integer
// indices used as values. Index conditions inside a function's argument
// are lifted out of it (f(select(c, a, b)) = [c] f(a) + [!c] f(b)).
//
// A rule is **proved** for all shapes when the normal form of lhs - rhs is
// shown to be zero: terms equal up to renaming merge; terms whose guard
// cannot hold are dropped; terms that differ only by disjoint guards join;
// every remaining term must cancel a term of opposite coefficient after a
// bijective change of its summation variables (each new variable plus or
// minus a distinct old one plus an offset) found by unifying the indices
// of their reads. Every index fact each step needs (guards unsatisfiable,
// disjoint or equivalent, indices equal) is an integer query to Z3 with
// the shape symbols universally quantified and positive.
//
// Otherwise the rule is **bounded**: for every assignment of its shape
// symbols in 1..N both sides are unrolled at every output element, each
// input element a real constant, max/min/abs/comparisons exact, other
// functions uninterpreted; one Z3 query per assignment asks for an element
// where the sides differ. A satisfying model is a candidate
// counterexample: it is **refuted** only when the reference interpreter,
// run on the model's inputs (or, failing that, on random integer inputs at
// the same shapes), computes different outputs. A solver timeout or an
// unconfirmed model gives **unknown**.
package smt
