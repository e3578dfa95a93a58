package api

import (
	"fmt"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/tensor"
)

// tensorsOf reads the tensors of a request, which must be exactly those
// of bindings (what says what they are), of their dtypes (bf16 given as
// f32) and shapes.
func tensorsOf(args []TensorArg, buffers [][]byte, bindings []plan.Binding, what string) (map[string]*tensor.Tensor, error) {
	dtypes := map[string]lang.DType{}
	for _, b := range bindings {
		dtypes[b.Name] = lang.ParseDType(b.DType)
	}
	out := map[string]*tensor.Tensor{}
	for _, a := range args {
		if _, dup := out[a.Name]; dup {
			return nil, fmt.Errorf("%s %s given twice", what, a.Name)
		}
		if a.Buffer < 0 || a.Buffer >= len(buffers) {
			return nil, fmt.Errorf("%s %s: buffer %d of %d", what, a.Name, a.Buffer, len(buffers))
		}
		for _, d := range a.Shape {
			if d < 0 {
				return nil, fmt.Errorf("%s %s: negative extent in shape %v", what, a.Name, a.Shape)
			}
		}
		t, err := npy.DecodeRaw(lang.ParseDType(a.DType), a.Shape, buffers[a.Buffer])
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, a.Name, err)
		}
		if dt, ok := dtypes[a.Name]; ok {
			t = npy.AsDType(t, dt)
		}
		out[a.Name] = t
	}
	if err := planio.Match(bindings, out, what); err != nil {
		return nil, err
	}
	return out, nil
}

// npyStored is the name of the dtype a tensor of dt is returned as.
func npyStored(dt lang.DType) string { return npy.Stored(dt).String() }
