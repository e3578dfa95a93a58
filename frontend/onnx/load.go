package onnx

import (
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"tofuc/frontend/onnx/onnxpb"
)

// Model is a decoded ONNX model file.
type Model struct {
	Path  string
	Proto *onnxpb.ModelProto
}

// Load reads and decodes the ONNX model at path.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Decode(path, data)
}

// Decode decodes the bytes of an ONNX model; path names it in errors and
// locates its external data.
func Decode(path string, data []byte) (*Model, error) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		return nil, fmt.Errorf("%s: not an ONNX model (the file is malformed or truncated): %w", path, err)
	}
	if mp.Graph == nil {
		return nil, fmt.Errorf("%s: not an ONNX model: it has no graph", path)
	}
	return &Model{Path: path, Proto: &mp}, nil
}

// Dir is the directory of the model file, where external data lives.
func (m *Model) Dir() string { return filepath.Dir(m.Path) }

// Opset is the version of the default (ai.onnx) operator set the model
// imports, or 0 when it names none.
func (m *Model) Opset() int64 {
	for _, o := range m.Proto.GetOpsetImport() {
		if o.GetDomain() == "" || o.GetDomain() == "ai.onnx" {
			return o.GetVersion()
		}
	}
	return 0
}
