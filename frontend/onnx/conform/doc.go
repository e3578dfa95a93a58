// Package conform runs ONNX conformance tests with tofuc: it imports a
// test's model, binds the inputs that determine shapes from its data,
// checks the TDL, evaluates it with the reference interpreter and compares
// each output with the expected one under the External tolerance
// (docs/onnx-conformance.md; a backend compiled in a precision mode that
// computes in f32 under that mode's whole-model tolerance where looser,
// and its arg-max: docs/precision.md). Two layouts are read: ONNX backend test
// directories (model.onnx, test_data_set_*/input_N.pb and output_N.pb)
// and "light" model files (NAME.onnx beside NAME_output_N.pb and, if
// present, NAME_input_0.pb).
package conform
