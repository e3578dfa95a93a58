package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/frontend/onnx"
	"tofuc/lang/ir"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// Model is a checked model ready to compile.
type Model struct {
	Module *check.Module
	Graph  *ir.Graph
	// Weights are the parameters the model file gives: an ONNX model's
	// initializers, or the .npz beside a .tdl file.
	Weights map[string]*tensor.Tensor
	// Path is the model's file, for reports and messages.
	Path string
	// Source identifies everything the graph was built from (the files,
	// the weights, the model's name and attributes), for the compile
	// cache; empty: the graph is compiled every time.
	Source string
}

// LoadFile loads a .tdl file, or imports a .onnx model, into prog. It
// returns the module and the model's weights: an ONNX model's
// initializers, or the .npz beside a .tdl file (what `tofuc import`
// writes), if there is one.
func LoadFile(prog *check.Program, path string) (*check.Module, map[string]*tensor.Tensor, error) {
	if filepath.Ext(path) == ".onnx" {
		res, err := ImportONNX(prog, path, nil)
		if err != nil {
			return nil, nil, err
		}
		m, err := prog.LoadSource(path, res.Source)
		if err == nil {
			m.Origins = res.Origins
		}
		return m, res.Params, err
	}
	m, err := prog.Load(path)
	if err != nil {
		return nil, nil, err
	}
	weights, err := npy.ReadNPZ(weightsPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil, nil
	}
	return m, weights, err
}

// weightsPath is the .npz beside a .tdl file.
func weightsPath(path string) string { return strings.TrimSuffix(path, filepath.Ext(path)) + ".npz" }

// ImportONNX imports the ONNX model at path; known binds graph inputs
// that determine shapes.
func ImportONNX(prog *check.Program, path string, known map[string]*tensor.Tensor) (*onnx.Result, error) {
	m, err := onnx.Load(path)
	if err != nil {
		return nil, err
	}
	return onnx.Import(m, onnx.Options{Known: known, Program: prog})
}

// Load loads the model called name (the only one when empty) of the file
// at path, with the attributes set, and identifies its sources.
func Load(path, name string, set map[string]ir.AttrValue) (*Model, error) {
	f, err := loadModelFile(path)
	if err != nil {
		return nil, err
	}
	return f.model(name, set)
}

// modelFile is a loaded model file, whose models Load elaborates.
type modelFile struct {
	prog    *check.Program
	module  *check.Module
	weights map[string]*tensor.Tensor
	path    string
}

func loadModelFile(path string) (*modelFile, error) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		return nil, err
	}
	m, weights, err := LoadFile(prog, path)
	if err != nil {
		return nil, err
	}
	return &modelFile{prog: prog, module: m, weights: weights, path: path}, nil
}

// model elaborates the model called name with the attributes set.
func (f *modelFile) model(name string, set map[string]ir.AttrValue) (*Model, error) {
	g, err := f.module.Model(name, set)
	if err != nil {
		return nil, err
	}
	source, err := sourceKey(f.prog, f.path, name, set)
	if err != nil {
		return nil, err
	}
	return &Model{Module: f.module, Graph: g, Weights: f.weights, Path: f.path, Source: source}, nil
}

// sourceKey hashes what a model's graph and weights come from: an ONNX
// file whole (weights and all), or every file the program loaded besides
// the standard library (the model's and its imports) and the weights
// beside the model; then the model's name and attributes. The standard
// library is part of tofuc's executable, which the compile cache hashes.
func sourceKey(prog *check.Program, path, name string, set map[string]ir.AttrValue) (string, error) {
	h := sha256.New()
	if filepath.Ext(path) == ".onnx" {
		if err := hashFile(h, path); err != nil {
			return "", err
		}
	} else {
		paths, srcs := prog.Sources()
		for i := range paths {
			fmt.Fprintf(h, "%s %d\n", paths[i], len(srcs[i]))
			h.Write(srcs[i])
		}
		if err := hashFile(h, weightsPath(path)); err != nil && !os.IsNotExist(err) {
			return "", err
		}
	}
	fmt.Fprintf(h, "model %q\n", name)
	var names []string
	for k := range set {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(h, "set %s=%s\n", k, set[k])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, path string) error {
	r, err := os.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Fprintf(h, "%s\n", filepath.Base(path))
	_, err = io.Copy(h, r)
	return err
}
