package cost

// Recomputed is how many nodes d priced or simulated anew.
func (d *Delta) Recomputed() int { return d.recomputed }
