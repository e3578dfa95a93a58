package plan

import (
	"math"
	"strings"
	"testing"
	"time"
)

// twoDevices is a small plan that validates: device 0 computes y from
// the input x and inverts the input m on the host; device 1 copies y,
// computes z from it and adds z and y (a reduction) into w.
func twoDevices() *Plan {
	f32 := func(n int64) Arg { return Arg{DType: "f32", Shape: []int64{n}} }
	buf := func(id int, name string, device int, role string, offset int64) Buffer {
		return Buffer{ID: id, Name: name, Device: device, DType: "f32", Shape: []int64{4}, Bytes: 16, Role: role, Offset: offset, ViewOf: -1}
	}
	whole := func(n int64) []Dim { return []Dim{{0, n}} }
	square := []Dim{{0, 2}, {0, 2}}
	return &Plan{
		Version: Version, Devices: 2, ArenaBytes: []int64{512, 256},
		Kernels: []Kernel{
			{Name: "k0", Form: "threads", Elements: 4, HostRange: 4, HostGrain: 1, Grid: 1, Block: 32, Args: []Arg{f32(4), f32(4)}, Writes: []int{1}},
			{Name: "k1", Form: "threads", Elements: 4, HostRange: 4, HostGrain: 1, Grid: 1, Block: 32, Args: []Arg{f32(4), f32(4), f32(4)}, Writes: []int{2}, Reducer: "sum"},
		},
		Buffers: []Buffer{
			buf(0, "x", 0, RoleInput, 0),
			buf(1, "y", 0, RoleActivation, 64),
			buf(2, "y@1", 1, RoleWorkspace, 0),
			buf(3, "z", 1, RoleOutput, 64),
			buf(4, "w", 1, RoleOutput, 128),
			{ID: 5, Name: "m", Device: 0, DType: "f32", Shape: []int64{2, 2}, Bytes: 16, Role: RoleInput, Offset: 256, ViewOf: -1},
			{ID: 6, Name: "inv", Device: 0, DType: "f64", Shape: []int64{2, 2}, Bytes: 32, Role: RoleOutput, Offset: 192, ViewOf: -1},
		},
		Inputs: []Binding{
			{Name: "x", DType: "f32", Shape: []int64{4}, Tiles: []Tile{{Buffer: 0, Box: whole(4)}}},
			{Name: "m", DType: "f32", Shape: []int64{2, 2}, Tiles: []Tile{{Buffer: 5, Box: square}}},
		},
		Outputs: []Binding{
			{Name: "z", DType: "f32", Shape: []int64{4}, Tiles: []Tile{{Buffer: 3, Box: whole(4)}}},
			{Name: "w", DType: "f32", Shape: []int64{4}, Tiles: []Tile{{Buffer: 4, Box: whole(4)}}},
			{Name: "inv", DType: "f64", Shape: []int64{2, 2}, Tiles: []Tile{{Buffer: 6, Box: square}}},
		},
		Init: [][]Step{nil, nil},
		Steps: [][]Step{
			{
				{Op: Launch, Kernel: 0, Args: []int{0, 1}, Label: "y"},
				{Op: Opaque, To: 6, Call: &OpaqueCall{Fn: "inverse", Args: []int{5}, Fixed: [][]int64{{-1, -1}}, Shape: []int64{2, 2}}, Label: "inv"},
			},
			{
				{Op: Copy, From: 1, Src: whole(4), To: 2, At: []int64{0}, After: []StepRef{{Device: 0, Step: 0}}, Label: "fetch y"},
				{Op: Launch, Kernel: 0, Args: []int{2, 3}, Label: "z"},
				{Op: Reduce, Reducer: "sum", Kernel: 1, Parts: []int{3, 1}, To: 4, After: []StepRef{{Device: 0, Step: 0}}, Label: "w"},
			},
		},
	}
}

// TestValidateRefuses: plans that disagree with themselves are refused,
// naming the field; the plan they are edited from validates.
func TestValidateRefuses(t *testing.T) {
	if err := twoDevices().Validate(); err != nil {
		t.Fatalf("the plan to edit: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"offset near 2^63", func(p *Plan) { p.Buffers[1].Offset = math.MaxInt64 - 100 }, "buffer 1 (y): offset 9223372036854775707: its 16 bytes do not lie in the arena of 512 bytes"},
		{"negative arena", func(p *Plan) { p.ArenaBytes[1] = -1 }, "device 1: arena_bytes -1"},
		{"too many devices", func(p *Plan) { p.Devices = MaxDevices + 1 }, "a plan for 1025 devices"},
		{"copy at near 2^63", func(p *Plan) { p.Steps[1][0].At[0] = math.MaxInt64 - 3 }, "device 1, step 0 (copy fetch y): src [{0 4}] at [9223372036854775804]"},
		{"copy at negative", func(p *Plan) { p.Steps[1][0].At[0] = -2 }, "src [{0 4}] at [-2]"},
		{"cells of an empty shape beyond 2^50", func(p *Plan) {
			p.Kernels[0].Args = append(p.Kernels[0].Args, Arg{DType: "f32", Shape: []int64{0, 1 << 40, 1 << 40}})
		}, "bad shape [0 1099511627776 1099511627776]"},
		{"a view outside its buffer", func(p *Plan) { p.Buffers[2].ViewOf, p.Buffers[2].Offset = 3, 72 }, "buffer 2 (y@1): view_of 3: bytes [72, 88) of device 1 are not part of buffer 3 (z), bytes [64, 80)"},
		{"a view of another device's buffer", func(p *Plan) { p.Buffers[2].ViewOf = 1 }, "are not part of buffer 1 (y)"},
		{"a view of itself", func(p *Plan) { p.Buffers[2].ViewOf, p.Buffers[3].ViewOf = 3, 2 }, "makes it a view of itself"},
		{"a view partly outside its buffer", func(p *Plan) { p.Buffers[4].ViewOf, p.Buffers[4].Offset = 3, 72 }, "buffer 4 (w): view_of 3: bytes [72, 88)"},
		{"writes not ending with the last argument", func(p *Plan) { p.Kernels[0].Writes = []int{0} }, "kernel 0 (k0): writes [0]"},
		{"no writes", func(p *Plan) { p.Kernels[0].Writes = nil }, "kernel 0 (k0): writes []"},
		{"an unknown reducer", func(p *Plan) { p.Kernels[1].Reducer = "avg" }, `kernel 1 (k1): unknown reducer "avg"`},
		{"a reducer its kernel does not do", func(p *Plan) { p.Steps[1][2].Reducer = "max" }, `device 1, step 2 (reduce w): reducer "max", but its kernel k1 () reduces by "sum"`},
		{"a reduction by a kernel of no reducer", func(p *Plan) { p.Steps[1][2].Kernel = 0 }, `reduces by ""`},
		{"a part twice", func(p *Plan) { p.Steps[1][2].Parts = []int{3, 3} }, "parts: buffers 3 (z) and 3 (z) share bytes: a part counted twice"},
		{"a reduction into one of its parts", func(p *Plan) { p.Steps[1][2].To = 3 }, "buffers 3 (z) and 3 (z) share bytes, and the step writes one of them"},
		{"a copy into its source", func(p *Plan) { p.Steps[1][0].From = 3; p.Steps[1][0].To = 3 }, "buffers 3 (z) and 3 (z) share bytes"},
		{"an opaque batch beyond its argument", func(p *Plan) {
			p.Steps[0][1].Call.Batch, p.Steps[0][1].Call.Fixed = []int64{30}, [][]int64{{0, -1}}
		}, "call.batch [30] and result_shape [2 2]: buffer 6 is of shape [2 2]"},
		{"an opaque batch beyond its argument, its result of that shape", func(p *Plan) {
			p.Steps[0][1].Call.Batch, p.Steps[0][1].Call.Fixed, p.Steps[0][1].Call.Shape = []int64{3}, [][]int64{{0, -1}}, []int64{2}
			p.Buffers[6].Shape, p.Buffers[6].Bytes = []int64{3, 2}, 48
			p.Outputs[2].Shape, p.Outputs[2].Tiles[0].Box = []int64{3, 2}, []Dim{{0, 3}, {0, 2}}
		}, "call.args: argument 0: dimension 0 of buffer 5 (shape [2 2]) is fixed to batch index 0, which runs to 3"},
		{"an opaque batch of 2^63-1", func(p *Plan) { p.Steps[0][1].Call.Batch = []int64{math.MaxInt64} }, "call.batch: bad shape"},
		{"an opaque batch of -1", func(p *Plan) { p.Steps[0][1].Call.Batch = []int64{-1} }, "call.batch: bad shape [-1]"},
		{"an opaque result into an input", func(p *Plan) {
			p.Steps[0][1].To = 0
			p.Steps[0][1].Call.Shape = []int64{4}
			p.Steps[0][1].Call.Fixed = [][]int64{{-1, -1}}
		}, "writes buffer 0 (x), which holds a tile of an input or a parameter"},
		{"an opaque result on another device", func(p *Plan) { p.Steps[0][1].To = 2; p.Steps[0][1].Call.Shape = []int64{4} }, "not their concatenation on device 0"},
		{"a copy not waiting for the write", func(p *Plan) { p.Steps[1][0].After = nil }, "device 1, step 0 (copy fetch y) reads buffer 1 (y) of device 0, which step 0 of device 0 (launch y) writes, and no `after` orders the two"},
		{"a write while another device reads", func(p *Plan) {
			p.Steps[0] = append(p.Steps[0], Step{Op: Launch, Kernel: 0, Args: []int{0, 1}, Label: "y again"})
		}, "device 1, step 0 (copy fetch y) reads buffer 1 (y) of device 0, which step 2 of device 0 (launch y again) writes"},
		{"an output's tile boxes overlapping", func(p *Plan) {
			p.Outputs[0].Shape = []int64{6}
			p.Outputs[0].Tiles = append(p.Outputs[0].Tiles, Tile{Buffer: 1, Box: []Dim{{2, 6}}})
		}, "output z: tile boxes [{0 4}] and [{2 6}] overlap"},
		{"an output's tiles leaving a part out", func(p *Plan) { p.Outputs[0].Shape = []int64{8} }, "output z: its tiles hold 4 of its 8 elements"},
		{"two tiles of one box on a device", func(p *Plan) {
			p.Outputs[0].Tiles = append(p.Outputs[0].Tiles, Tile{Buffer: 4, Box: p.Outputs[0].Tiles[0].Box})
			p.Buffers[4].Device = p.Buffers[p.Outputs[0].Tiles[0].Buffer].Device
		}, "output z: two tiles of box [{0 4}] on device"},
		{"too many tiles", func(p *Plan) {
			for range MaxTiles {
				p.Outputs[0].Tiles = append(p.Outputs[0].Tiles, p.Outputs[0].Tiles[0])
			}
		}, "output z: 4097 tiles: a binding has 1 to 4096"},
		{"a tile box reversed", func(p *Plan) { p.Outputs[0].Tiles[0].Box = []Dim{{4, 0}} }, "tile box [{4 0}] does not fit"},
		{"a next value of no parameter", func(p *Plan) { p.Next = map[string]string{"x": "z"} }, "next: x is not a parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := twoDevices()
			tc.edit(p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestValidateOrders: reads of another device's buffer ordered through
// a third device, or after its last write through the reader's own
// order, validate.
func TestValidateOrders(t *testing.T) {
	p := twoDevices()
	p.Steps[1][2].After = nil // ordered by the copy, before it on device 1
	if err := p.Validate(); err != nil {
		t.Errorf("a reduction after its device's copy that waits for the write: %v", err)
	}
	p = twoDevices()
	p.Steps[0] = append(p.Steps[0], Step{Op: Launch, Kernel: 0, Args: []int{0, 1}, Label: "y again",
		After: []StepRef{{Device: 1, Step: 2}}})
	if err := p.Validate(); err != nil {
		t.Errorf("a write after the reads: %v", err)
	}
}

// TestValidateLinear: Validate's cost grows about linearly with a plan's
// size: chains of views (each a view of the one before), buffers reusing
// the same bytes one after another, steps each waiting for another
// device's (each device going on after one step of another). Each took
// minutes when its cost grew with the square of the size.
func TestValidateLinear(t *testing.T) {
	const n = 100_000
	for _, tc := range []struct {
		name string
		plan func() *Plan
	}{
		{"views", func() *Plan { return viewChain(n) }},
		{"reused bytes", func() *Plan { return reusedBytes(n) }},
		{"dependencies", func() *Plan { return crossDependencies(n) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.plan()
			start := time.Now()
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Validate took %v", d)
			}
		})
	}
}

// oneDevice is a plan of one device and one kernel writing f32[4].
func oneDevice(devices int) *Plan {
	return &Plan{Version: Version, Devices: devices, ArenaBytes: make([]int64, devices),
		Kernels: []Kernel{{Name: "k", Form: "threads", Elements: 4, HostRange: 4, Args: []Arg{{DType: "f32", Shape: []int64{4}}}, Writes: []int{0}}},
		Init:    make([][]Step, devices), Steps: make([][]Step, devices)}
}

func f32Buffer(id, device int, offset int64, viewOf int) Buffer {
	return Buffer{ID: id, Device: device, DType: "f32", Shape: []int64{4}, Bytes: 16, Role: RoleActivation, Offset: offset, ViewOf: viewOf}
}

// viewChain is n buffers each a view of the one before, written by one
// launch each.
func viewChain(n int) *Plan {
	p := oneDevice(1)
	p.ArenaBytes[0] = 16
	for i := range n {
		p.Buffers = append(p.Buffers, f32Buffer(i, 0, 0, i-1))
		p.Steps[0] = append(p.Steps[0], Step{Op: Launch, Args: []int{i}})
	}
	return p
}

// reusedBytes is n buffers at the same bytes, each written by one launch
// in turn.
func reusedBytes(n int) *Plan {
	p := viewChain(n)
	for i := range p.Buffers {
		p.Buffers[i].ViewOf = -1
	}
	return p
}

// crossDependencies is n steps over all the devices a plan may have,
// one chain of dependencies: step s of each device waits for step s of
// the next device, the last device's for step s-1 of the first.
func crossDependencies(n int) *Plan {
	p := oneDevice(MaxDevices)
	for i := range n {
		d, s := i%MaxDevices, i/MaxDevices
		p.ArenaBytes[d] = 16
		p.Buffers = append(p.Buffers, f32Buffer(i, d, 0, -1))
		step := Step{Op: Launch, Args: []int{i}}
		switch {
		case d+1 < MaxDevices && i+1 < n:
			step.After = []StepRef{{Device: d + 1, Step: s}}
		case d+1 == MaxDevices && s > 0:
			step.After = []StepRef{{Device: 0, Step: s - 1}}
		}
		p.Steps[d] = append(p.Steps[d], step)
	}
	return p
}

// TestBytesReusedAfterRemoteReads: a device may give the bytes of a
// buffer another device reads to a later buffer once the later buffer's
// first step waits for every such read (device 1 reads y by a copy and
// by a reduction); waiting for one of them, or none, is refused.
func TestBytesReusedAfterRemoteReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after []StepRef
		want  string
	}{
		{"no wait", nil, "share bytes"},
		{"a read after the bytes are given away", nil, "share bytes"},
		{"a wait for the copy only", []StepRef{{Device: 1, Step: 0}}, "share bytes"},
		{"a wait for both reads", []StepRef{{Device: 1, Step: 2}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := twoDevices()
			y := p.Buffers[1]
			p.Buffers = append(p.Buffers, Buffer{ID: 7, Name: "y2", Device: 0, DType: "f32", Shape: []int64{4}, Bytes: 16, Role: RoleActivation, Offset: y.Offset, ViewOf: -1})
			p.Steps[0] = append(p.Steps[0], Step{Op: Launch, Kernel: 0, Args: []int{0, 7}, After: tc.after, Label: "y2"})
			if tc.name == "a read after the bytes are given away" {
				// Device 1 reads y only once y2 has its bytes.
				p.Steps[1][0].After = []StepRef{{Device: 0, Step: 2}}
				p.Steps[1][2].After = []StepRef{{Device: 0, Step: 2}}
			}
			err := p.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
