// Package search optimises dataflow graphs with verified rewrite rules
// (stdlib/rules.tdl; each verified by rewrite/smt before its first match
// is applied, and used only when proved or bounded as far as its
// constants need), MetaFlow style: a
// backtracking search over a priority queue of graphs ordered by the
// roofline cost of analysis/cost, which keeps every candidate within a
// relaxation factor alpha (1.05) of the best graph so far, so that it can
// pass through slower graphs (enlarging a 1x1 kernel before fusing two
// convolutions); a canonical hash skips graphs already seen, common
// subexpressions are merged after every rewrite and a rewrite that would
// make a cycle is dropped. Graphs above a threshold (30 operators) are
// split recursively at minimum vertex cuts (max-flow, each operator
// weighted by the rule matches that use it), each part searched on its
// own, then a local search runs around the cuts. A part is searched as a
// graph of its own with a halo of its neighbours (priced, not rewritten),
// so that a candidate costs what the part does, and its best is put back
// and kept when the whole graph gains. A rewrite that does not advance is
// a detour, expanded only near the operators it made (enlarging a 1x1
// convolution leads somewhere only by fusing it with a sibling); the
// rules that match the graph are verified on every core before the search. Rules are matched on the
// operator, its attributes and the shapes of the rule's variables, and the
// target side is instantiated at the matched shapes. A rule with
// attributes is a template: a loose match binds its attributes from the
// matched extents and operator attributes, and the instance at those
// values is verified with rewrite/smt before it is matched exactly and
// used. A rule whose source is concat(L, R) also fuses two values that are
// not concatenated (siblings such as two convolutions of one input): they
// become slices of the target, sound by the rule and the split lemmas at
// the matched extents, which are verified too (docs/rules.md).
package search
