package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"tofuc/parser"
	"tofuc/pipeline"
	"tofuc/runtime/safefile"

	"tofuc/analysis/check"
	"tofuc/frontend/onnx"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

func runImport(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("import", stderr)
	out := fs.StringP("output", "o", "", "the TDL file to write (default: MODEL with .tdl for .onnx); its weights go to the .npz beside it")
	knowns := fs.StringArray("known", nil, "bind a graph input that determines shapes, NAME=PATH (.npy or a serialized ONNX tensor .pb; repeatable)")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "import", "expected one MODEL.onnx, found %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	if *out == "" {
		*out = strings.TrimSuffix(path, filepath.Ext(path)) + ".tdl"
	}
	if filepath.Ext(*out) != ".tdl" {
		return usageError(stderr, "import", "-o must name a .tdl file")
	}
	known, err := readKnown(*knowns)
	if err != nil {
		return usageError(stderr, "import", "%v", err)
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		return fail(stderr, err)
	}
	res, err := pipeline.ImportONNX(prog, path, known)
	if err != nil {
		return fail(stderr, err)
	}
	if err := safefile.WriteFile(*out, res.Source, 0o644); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "%s: %s, %d folded at import -> %s\n", path, count(res.Nodes, "node"), res.Folded, *out)
	weights := strings.TrimSuffix(*out, ".tdl") + ".npz"
	if len(res.Params) == 0 {
		if err := os.Remove(weights); err != nil && !os.IsNotExist(err) {
			return fail(stderr, err)
		}
		return exitOK
	}
	if err := npy.WriteNPZ(weights, res.Params); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "%s -> %s\n", count(len(res.Params), "parameter"), weights)
	return exitOK
}

// readKnown reads NAME=PATH bindings of graph inputs.
func readKnown(specs []string) (map[string]*tensor.Tensor, error) {
	known := map[string]*tensor.Tensor{}
	for _, s := range specs {
		name, path, ok := strings.Cut(s, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--known %q: want NAME=PATH", s)
		}
		var t *tensor.Tensor
		var err error
		if filepath.Ext(path) == ".pb" {
			t, err = onnx.ReadTensorFile(path)
		} else {
			t, err = npy.ReadFile(path)
		}
		if err != nil {
			return nil, fmt.Errorf("--known %s: %w", name, err)
		}
		known[name] = t
	}
	return known, nil
}
