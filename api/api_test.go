package api

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// call sends a request with tensors as raw arrays and decodes the reply.
func call(t *testing.T, s *Session, req map[string]any, tensors map[string]*tensor.Tensor) (Reply, map[string]*tensor.Tensor) {
	t.Helper()
	var args []map[string]any
	var buffers [][]byte
	for name, x := range tensors {
		b := make([]byte, npy.RawBytes(x))
		if err := npy.EncodeRaw(b, x); err != nil {
			t.Fatal(err)
		}
		args = append(args, map[string]any{"name": name, "dtype": npy.Stored(x.DType).String(), "shape": x.Shape, "buffer": len(buffers)})
		buffers = append(buffers, b)
	}
	req["tensors"] = args
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out, ts := s.Handle(data, buffers)
	var r Reply
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("reply %s: %v", out, err)
	}
	if len(ts) != len(r.Tensors) {
		t.Fatalf("%d tensors for %d described", len(ts), len(r.Tensors))
	}
	got := map[string]*tensor.Tensor{}
	for i, d := range r.Tensors {
		got[d.Name] = ts[i]
	}
	return r, got
}

func mustCall(t *testing.T, s *Session, req map[string]any, tensors map[string]*tensor.Tensor) (Reply, map[string]*tensor.Tensor) {
	t.Helper()
	r, got := call(t, s, req, tensors)
	if r.Error != "" {
		t.Fatalf("%v: %s", req["op"], r.Error)
	}
	return r, got
}

func mlpPath(t *testing.T) string {
	t.Setenv("TOFUC_CACHE", t.TempDir())
	return filepath.Join("..", "examples", "mlp.tdl")
}

func randomTensor(dt lang.DType, shape []int, seed int) *tensor.Tensor {
	vals := make([]float64, tensor.NumElements(shape))
	for i := range vals {
		vals[i] = math.Sin(float64(i*7 + seed))
	}
	return tensor.FromFloats(dt, shape, vals)
}

// TestSessionRunsAndTrains compiles the MLP for inference and for
// training, runs and trains it through requests, and saves and reopens
// it: what the Python package relies on.
func TestSessionRunsAndTrains(t *testing.T) {
	path := mlpPath(t)
	s := NewSession()
	defer s.Close()
	r, _ := mustCall(t, s, map[string]any{"op": "compile", "compile": map[string]any{"path": path, "set": []string{"batch=2"}, "seed": 1}}, nil)
	if r.Model == 0 || r.Info == nil || len(r.Info.Inputs) != 1 || r.Info.Inputs[0].Name != "x" {
		t.Fatalf("compile reply %+v", r)
	}
	m := r.Model
	x := randomTensor(lang.F32, []int{2, 784}, 0)
	_, out := mustCall(t, s, map[string]any{"op": "run", "model": m}, map[string]*tensor.Tensor{"x": x})
	logits := out["logits"]
	if logits == nil || logits.DType != lang.F32 || len(logits.Shape) != 2 || logits.Shape[1] != 10 {
		t.Fatalf("outputs %v", out)
	}
	_, again := mustCall(t, s, map[string]any{"op": "run", "model": m}, map[string]*tensor.Tensor{"x": x})
	if err := tensor.Compare(again["logits"], logits, tensor.Tolerance{}); err != nil {
		t.Fatalf("a second run differs: %v", err)
	}

	saved := filepath.Join(t.TempDir(), "saved")
	b3 := tensor.FromFloats(lang.F32, []int{10}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	mustCall(t, s, map[string]any{"op": "set_params", "model": m}, map[string]*tensor.Tensor{"b3": b3})
	_, shifted := mustCall(t, s, map[string]any{"op": "run", "model": m}, map[string]*tensor.Tensor{"x": x})
	for i, v := range shifted["logits"].F {
		if want := logits.F[i] + b3.F[i%10]; math.Abs(v-want) > 1e-5 {
			t.Fatalf("logit %d is %g after b3 += %g, want %g", i, v, b3.F[i%10], want)
		}
	}
	mustCall(t, s, map[string]any{"op": "save", "model": m, "dir": saved}, nil)
	r, _ = mustCall(t, s, map[string]any{"op": "open", "dir": saved}, nil)
	_, reopened := mustCall(t, s, map[string]any{"op": "run", "model": r.Model}, map[string]*tensor.Tensor{"x": x})
	if err := tensor.Compare(reopened["logits"], shifted["logits"], tensor.Tolerance{}); err != nil {
		t.Fatalf("the saved plan runs otherwise: %v", err)
	}

	r, _ = mustCall(t, s, map[string]any{"op": "compile", "compile": map[string]any{"path": path, "set": []string{"batch=8"}, "train": true, "loss": "cross_entropy", "optimizer": "sgd", "lr": 0.1}}, nil)
	labels := tensor.FromInts(lang.I64, []int{8}, []int64{0, 1, 2, 3, 4, 5, 6, 7})
	batch := map[string]*tensor.Tensor{"x": randomTensor(lang.F32, []int{8, 784}, 3), "labels": labels}
	var losses []float64
	for i := 1; i <= 20; i++ {
		step, _ := mustCall(t, s, map[string]any{"op": "train_step", "model": r.Model}, batch)
		if step.Loss == nil || step.Step != i {
			t.Fatalf("step reply %+v", step)
		}
		losses = append(losses, *step.Loss)
	}
	if losses[19] >= losses[0]/2 {
		t.Fatalf("losses %v: twenty steps on one batch should halve the loss", losses)
	}
	mustCall(t, s, map[string]any{"op": "close", "model": r.Model}, nil)
	if r, _ := call(t, s, map[string]any{"op": "run", "model": r.Model}, batch); !strings.Contains(r.Error, "no model") {
		t.Fatalf("a closed model ran: %+v", r)
	}
}

// TestSessionRefuses: malformed requests and tensors are errors in the
// reply, never a panic or a run on wrong data.
func TestSessionRefuses(t *testing.T) {
	path := mlpPath(t)
	s := NewSession()
	defer s.Close()
	r, _ := mustCall(t, s, map[string]any{"op": "compile", "compile": map[string]any{"path": path, "set": []string{"batch=2"}, "no_optimize": true}}, nil)
	m := r.Model
	x := randomTensor(lang.F32, []int{2, 784}, 0)
	raw := make([]byte, npy.RawBytes(x))
	npy.EncodeRaw(raw, x)
	cases := []struct {
		req     string
		buffers [][]byte
		want    string
	}{
		{`{`, nil, "unexpected end"},
		{`{"op": "fly"}`, nil, `unknown request "fly"`},
		{`{"op": "compile"}`, nil, "no arguments"},
		{`{"op": "compile", "compile": {"path": "missing.tdl"}}`, nil, "missing.tdl"},
		{`{"op": "compile", "compile": {"path": "` + path + `", "devices": 100000}}`, nil, "--devices must be 1 to"},
		{`{"op": "compile", "compile": {"path": "` + path + `", "backend": "tpu"}}`, nil, `unknown backend "tpu"`},
		{`{"op": "compile", "compile": {"path": "` + path + `", "devices": 2, "objective": "speed"}}`, nil, "--objective must be time or bytes"},
		{`{"op": "compile", "compile": {"path": "` + path + `", "objective": "bytes"}}`, nil, "--objective goes with --devices N > 1"},
		{`{"op": "open", "dir": "` + t.TempDir() + `"}`, nil, "plan.json"},
		{`{"op": "run", "model": 1}`, nil, "the inputs lack input x"},
		{`{"op": "run", "model": 1, "tensors": [{"name": "x", "dtype": "f32", "shape": [2, 784], "buffer": 1}]}`, [][]byte{raw}, "buffer 1 of 1"},
		{`{"op": "run", "model": 1, "tensors": [{"name": "x", "dtype": "f32", "shape": [2, 784], "buffer": 0}]}`, [][]byte{raw[:100]}, "100 bytes for a raw f32[2 784] array"},
		{`{"op": "run", "model": 1, "tensors": [{"name": "x", "dtype": "f32", "shape": [-2, 784], "buffer": 0}]}`, [][]byte{raw}, "negative extent"},
		{`{"op": "run", "model": 1, "tensors": [{"name": "x", "dtype": "f64", "shape": [1, 784], "buffer": 0}]}`, [][]byte{raw}, "input x is f64[1 784], the plan wants f32[2 784]"},
		{`{"op": "run", "model": 1, "tensors": [{"name": "x", "dtype": "c64", "shape": [2, 784], "buffer": 0}]}`, [][]byte{raw}, "no raw arrays"},
		{`{"op": "train_step", "model": 1}`, nil, "not a training plan"},
		{`{"op": "set_params", "model": 1, "tensors": [{"name": "w9", "dtype": "f32", "shape": [2, 784], "buffer": 0}]}`, [][]byte{raw}, "w9"},
		{`{"op": "run", "model": 7}`, nil, "no model 7"},
	}
	if m != 1 {
		t.Fatalf("the first model's handle is %d", m)
	}
	for _, c := range cases {
		out, ts := s.Handle([]byte(c.req), c.buffers)
		var r Reply
		if err := json.Unmarshal(out, &r); err != nil || !strings.Contains(r.Error, c.want) || ts != nil {
			t.Errorf("%s: reply %s (%d tensors), want an error with %q", c.req, out, len(ts), c.want)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
