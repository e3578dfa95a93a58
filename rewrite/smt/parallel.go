package smt

import (
	"runtime"
	"sync"

	"tofuc/analysis/check"
)

// VerifyAll verifies rules in parallel, one Z3 context per rule, and
// returns the results in the rules' order.
func VerifyAll(rules []*check.Rule, opts Options) []Result {
	out := make([]Result, len(rules))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(rules)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				out[i] = Verify(rules[i], opts)
			}
		}()
	}
	for i := range rules {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}
