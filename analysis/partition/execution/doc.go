// Package execution generates the partitioned execution graph of a plan
// (Tofu §3.6) and runs it with the reference interpreter, devices
// simulated.
//
// Every operator gets one copy per device (Op): the instance that device
// runs on its slice (strategy.Worker applied step by step with the
// device's index in each step's group, so uneven parts and halos are
// exact), one fused multi-region fetch of the input regions it does not
// hold (Tofu's MultiFetch: a list of pieces, each a box of another
// device's tile), the box of the output it computes, and for split
// reductions the group of devices whose partial outputs are combined
// with the reducer, spread over the group (an all-reduce, then each
// device keeps its tile). Each device's copies keep the original
// operator order through control dependencies, so that a memory planner
// can reuse buffers as it would on one device.
//
// Run executes the graph: tiles of the inputs and parameters are cut
// from whole tensors, each Op reads its fetched regions from the other
// devices' tiles, and the graph's outputs are assembled from their tiles.
// Where no partial outputs are combined the result is bit-identical to
// the unpartitioned graph's; where they are, it is equal within the
// tolerance for reordered sums (docs/testing.md).
package execution
