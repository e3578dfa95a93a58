package cost

import "math"

// AllReduceSeconds is an all-reduce of bytes over g devices whose
// slowest link is l, as NCCL's algorithms take it, the cheaper of two:
// a ring (a reduce-scatter then an all-gather: 2(g−1) steps, each
// moving 1/g of the bytes through every device's link and paying the
// latency) and a tree (the bytes reduced up a binary tree and broadcast
// down it, pipelined: twice the bytes through a link, 2·⌈log₂ g⌉
// latencies), which wins on small messages. The reduction's arithmetic
// runs inside the library, at memory speed: not priced.
func AllReduceSeconds(bytes int64, g int, l Link) float64 {
	if g < 2 {
		return 0
	}
	n, b := float64(g), float64(bytes)
	ring := 2*(n-1)/n*b/l.Bandwidth + 2*(n-1)*l.Latency
	tree := 2*b/l.Bandwidth + 2*math.Ceil(math.Log2(n))*l.Latency
	return min(ring, tree)
}
