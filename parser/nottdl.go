package parser

import (
	"bytes"
	"path/filepath"
)

// notTDL says what a file given as TDL is instead, when it is clearly
// something else (a NumPy array, an archive, an ONNX model, any binary
// file), so that the user reads that rather than a lexical error; "" for
// text.
func notTDL(path string, src []byte) string {
	switch {
	case bytes.HasPrefix(src, []byte("\x93NUMPY")):
		return "this is a NumPy .npy file (a tensor), not TDL; commands take tensors with flags such as --in NAME=PATH.npy"
	case bytes.HasPrefix(src, []byte("PK\x03\x04")):
		return "this is a zip archive (a NumPy .npz file of tensors?), not TDL; commands take parameters with --params PATH.npz"
	case !binary(src):
		return ""
	case filepath.Ext(path) == ".onnx":
		return "this is an ONNX model, not TDL: commands that take a MODEL read it as it is, and tofuc import converts it to TDL"
	}
	return "this is a binary file, not TDL"
}

// binary reports whether the start of src holds a control character that
// no text file has (an ONNX model starts with one, a protobuf tag).
func binary(src []byte) bool {
	for _, c := range src[:min(len(src), 4096)] {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' {
			return true
		}
	}
	return false
}
