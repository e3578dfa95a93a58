package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"tofuc/analysis/check"
	"tofuc/parser/onnx"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// loadModel loads a .tdl file, or imports a .onnx model, into prog. It
// returns the module and the model's weights: an ONNX model's
// initializers, or the .npz beside a .tdl file (what `tofuc import`
// writes), if there is one.
func loadModel(prog *check.Program, path string) (*check.Module, map[string]*tensor.Tensor, error) {
	if filepath.Ext(path) == ".onnx" {
		res, err := importONNX(prog, path, nil)
		if err != nil {
			return nil, nil, err
		}
		m, err := prog.LoadSource(path, res.Source)
		return m, res.Params, err
	}
	m, err := prog.Load(path)
	if err != nil {
		return nil, nil, err
	}
	weights, err := npy.ReadNPZ(strings.TrimSuffix(path, filepath.Ext(path)) + ".npz")
	if errors.Is(err, os.ErrNotExist) {
		return m, nil, nil
	}
	return m, weights, err
}

// importONNX imports the ONNX model at path; known binds graph inputs
// that determine shapes.
func importONNX(prog *check.Program, path string, known map[string]*tensor.Tensor) (*onnx.Result, error) {
	m, err := onnx.Load(path)
	if err != nil {
		return nil, err
	}
	return onnx.Import(m, onnx.Options{Known: known, Program: prog})
}
