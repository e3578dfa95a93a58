package partition

import "tofuc/analysis/cost"

// Pricer is what RefineTimeWith prices and simulates proposals with.
type Pricer = pricer

// RefineTimeWith is RefineTime with each proposal priced and simulated
// by price, for tests that compare ways of pricing.
func RefineTimeWith(g *cost.Graph, r *Result, price Pricer, memory int64, seed uint64, steps int) (*Result, *MCMC, error) {
	return refineTime(g, r, price, memory, seed, steps)
}

var TimeFactorisations = timeFactorisations
