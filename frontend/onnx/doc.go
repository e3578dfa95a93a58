// Package onnx imports ONNX models into TDL.
//
// Load decodes a model file (and its external-data tensors); Import turns
// its graph into the source of a TDL model that calls stdlib operators,
// with the weights as parameters. Constant subgraphs are folded at import
// with the reference interpreter, and graph inputs that determine shapes
// can be bound to known values. Every operator that cannot be imported is
// reported at once, with its node name and opset. The mapping from ONNX
// operators to stdlib operators is the table in ops.go; docs/onnx.md
// describes the import and docs/onnx-conformance.md how well it does.
package onnx
