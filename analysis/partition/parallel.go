package partition

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallel runs f(0), …, f(n-1) on up to GOMAXPROCS goroutines: the
// strategy analyses of a step's distinct views (cost.Graph shares them
// between the nodes and steps that need the same instance), the pruning
// of each variable's values, the local searches from each start.
func parallel(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
}
