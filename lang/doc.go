// Package lang holds what every pass of tofuc reads: source positions and
// diagnostics, data types, symbolic dimensions, the syntax tree of a TDL file
// (AST), and the elaborated lambda IR: fixed-rank operator instances whose
// bodies are expressions over index variables with known ranges, and the
// dataflow graph of a model built from them.
//
// lang imports nothing of tofuc. The parser produces its AST; the checker
// (analysis/check) turns the AST into IR; the interpreter, the analyses and
// the code generator read the IR.
package lang
