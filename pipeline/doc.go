// Package pipeline assembles tofuc's compiler: one entry point, Compile,
// takes a checked model to a compiled plan, and every way into the back
// end goes through it: `tofuc compile`, the compiled backends of `eval`,
// `bench` and `onnx-test` (Backend), `make gpu-bundle`, the runtime tests
// and the GPU checks.
//
// Compile runs the stages in order (docs/architecture.md):
//
//  1. with several devices, operators that run decomposed are split into
//     their parts (partition.Decompose);
//  2. with Train, the training graph (autodiff.TrainingGraph); else,
//     unless NoOptimize, the verified rewrites (rewrite/search);
//  3. with several devices, the partition search and its report
//     (Partition), and the execution graph of the chosen plan;
//  4. code generation (codegen) for the targets asked for, and the plan;
//  5. the parameters: the model's weights and the initial values of the
//     others (from Seed), written to params.npz, and the report.
//
// A compile whose inputs have not changed reuses what the last one wrote
// (the compile cache, cache.go). Load reads a model file (.tdl, or .onnx
// through the importer) and identifies its sources for the cache.
package pipeline
