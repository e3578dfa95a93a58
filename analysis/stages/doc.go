// Package stages plans pipeline-parallel training (GraphPipe, Jeon's
// thesis, chapter 3): a training graph's layers cut into stages, each on
// its own group of devices, a step's batch cut into micro-batches that
// flow through them.
//
// Layers (NewLayers) are the forward operator groups of the coarsened
// graph (analysis/partition) with their backward operators, gradient
// sums and updates, priced by the cost model's roofline at the whole
// batch and at half of it: a layer's seconds are affine in the samples
// a device computes. Forward dataflow between layers is a DAG.
//
// Search decomposes the DAG into series and parallel parts (sp.go) and,
// for each micro-batch size, binary-searches the bound on the slowest
// stage's time per sample for which a dynamic program over the
// decomposition needs at most the devices given: each part is one stage
// on the fewest devices that keep it within the bound (the stage
// data-parallel inside, its gradients all-reduced once per step), or
// split — a series into consecutive segments, parallel parts onto
// disjoint devices. The sequential baseline runs the same search over
// the layers linearised (PipeDream's planner). Plans at the bound and
// looser ones are scheduled 1F1B and simulated (schedule.go); the
// fastest step that fits in memory wins.
//
// Parts turns a plan into the stages of an execution graph
// (analysis/partition/execution.BuildStaged): each stage's nodes split
// by data parallelism over its micro-batches times its devices, one
// slot per micro-batch per device, so that pipeline plans compile and
// run as partition plans do (docs/partition.md, "Pipeline plans").
package stages
