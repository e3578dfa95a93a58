// Package strategy enumerates Tofu's partition-n-reduce strategies of an
// operator instance from its lambdas (Tofu §3.4), with no per-operator
// table: split an output dimension (each worker computes a slice of the
// output; the parts are concatenated) or split a reduction variable (each
// worker computes a partial output over part of the range; the partials are
// combined with the reducer). For every strategy it derives, by symbolic
// interval analysis (analysis/interval), the region of every input a worker
// reads, halos included, and the worker's share of the work. Worker builds
// the instance one worker runs on its regions, which the property tests run
// against the whole operator and the partitioner uses for execution graphs.
package strategy
