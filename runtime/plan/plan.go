package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"tofuc/lang/precision"
	"tofuc/runtime/safefile"
)

// Version is the schema version this package reads and writes
// (docs/plan.md, "Versions").
const Version = 6

// MaxDevices bounds the devices of a plan (and of a partition search,
// analysis/partition's MaxDevices): Validate's ordering check costs up
// to its steps times its devices.
const MaxDevices = 1024

// MaxTiles bounds a binding's tiles: Validate compares their boxes
// pairwise. A pipeline plan's batched input has a tile per slot (a
// stage's micro-batches times its devices: 64 × 32 at most).
const MaxTiles = 4096

// Plan is a compiled model ready to run.
type Plan struct {
	Version int    `json:"version"`
	Model   string `json:"model"`
	Devices int    `json:"devices"`
	// Precision is the arithmetic the kernels were compiled for
	// (docs/precision.md); absent in a plan of the exact mode.
	Precision precision.Mode `json:"precision,omitempty"`
	// Modules are the compiled files of each target, by the target's
	// name ("nvptx", "host", "simt").
	Modules map[string]Module `json:"modules"`
	Kernels []Kernel          `json:"kernels"`
	// Placement are the parts of the plan that run on one of several
	// backends (steps with Place).
	Placement []PlaceGroup `json:"placement,omitempty"`
	Buffers   []Buffer     `json:"buffers"`
	// ArenaBytes is each device's arena: the peak of its live buffers.
	ArenaBytes []int64   `json:"arena_bytes"`
	Inputs     []Binding `json:"inputs"`
	Params     []Binding `json:"params"`
	// ParamsFile is the initial parameters compile wrote (params.npz),
	// with its length and hash: a run reading them from the plan's
	// folder refuses another compile's.
	ParamsFile *File     `json:"params_file,omitempty"`
	Outputs    []Binding `json:"outputs"`
	// Next maps each parameter a training plan updates (optimizer state
	// included) to the output holding its value for the next step, of
	// the parameter's dtype and shape (autodiff.TrainingGraph's next).
	Next map[string]string `json:"next,omitempty"`
	// Init holds each device's steps that run when parameters are bound;
	// Steps those that run on every call.
	Init  [][]Step `json:"init"`
	Steps [][]Step `json:"steps"`
	// Seal is the SHA-256 of the plan's JSON without it (Write sets it):
	// a plan changed after it was written is refused when it runs.
	Seal string `json:"seal,omitempty"`
}

// Module is what one target compiled.
type Module struct {
	// Files are what the target's runtime loads: one file for every
	// kernel (a shared object), or one per group of kernels, which
	// Kernel.Module indexes (nvptx's PTX modules).
	Files []File `json:"files,omitempty"`
	// IR are the same groups as LLVM IR, for people to read (nvptx's
	// with --emit llvm).
	IR []File `json:"ir,omitempty"`
	// Requires are the CPU's instruction-set extensions the files may use
	// (a shared object compiled for the compiling machine's CPU): a
	// runtime on a CPU without one refuses them.
	Requires []string `json:"requires,omitempty"`
}

// File is a compiled file, relative to the plan's folder, with its
// length and SHA-256, which a runtime checks before it loads it (File.Read).
type File struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Kernel is a compiled kernel.
type Kernel struct {
	Name   string `json:"name"`   // the entry's symbol in every module
	Module int    `json:"module"` // its group: the index into a target's files when it has one per group
	Label  string `json:"label"`  // the operators or nodes it computes
	Kind   string `json:"kind"`   // elementwise, injective, gather, contraction, reduction
	Form   string `json:"form"`   // threads, blocks, tiled or rows
	// Elements is the number of output elements.
	Elements int64 `json:"elements"`
	// HostRange is what the host flavour computes per call, [0,
	// HostRange): output elements, or a contraction's tasks; HostGrain
	// the fewest of them worth a thread of their own.
	HostRange int64 `json:"host_range"`
	HostGrain int64 `json:"host_grain"`
	// HostPhase, when positive, is how many items at the start of the
	// host range run, all of them, before any of the rest starts (a
	// contraction packing B for all of its tasks).
	HostPhase int64 `json:"host_phase,omitempty"`
	// Grid and Block are the GPU launch geometry (blocks, threads per
	// block), Shared its shared memory in bytes: static (declared in its
	// module), or with DynamicShared dynamic, given at launch (above
	// MaxShared a GPU runtime opts the kernel in first); Sync says
	// whether its threads meet at barriers or warp shuffles.
	Grid          int64 `json:"grid"`
	Block         int64 `json:"block"`
	Shared        int64 `json:"shared_bytes"`
	DynamicShared bool  `json:"shared_dynamic,omitempty"`
	Sync          bool  `json:"sync"`
	// HostOnly marks a kernel that only the host runtime runs (packing
	// weights for its micro-kernels, or a chained launch, form "chain":
	// two kernels a block of rows at a time); its GPU entry does
	// nothing, its grid is 0, and a GPU runtime skips its launches.
	// GPUOnly marks one that only a GPU runtime runs (a chained launch's
	// two kernels, each launched on its own after it); its host entry
	// does nothing, its host range is 0, and the host runtime skips its
	// launches.
	HostOnly bool `json:"host_only,omitempty"`
	GPUOnly  bool `json:"gpu_only,omitempty"`
	// Args are the dtype and shape of each buffer argument, the written
	// one last (a chain: its first kernel's, their written one last, then
	// its second's); every launch passes buffers of these.
	Args []Arg `json:"args"`
	// Writes are the indexes of the arguments a launch writes: the last,
	// a chain's first kernel's output, a contraction's packed B; it
	// reads the others. Reducer is a reduction kernel's (a reduce step's
	// kernel: sum, prod, max or min), empty for every other.
	Writes  []int  `json:"writes"`
	Reducer string `json:"reducer,omitempty"`
	// Sites are the accesses checked at run time without a default, for
	// the message when one is out of range.
	Sites []Site `json:"sites,omitempty"`
	FLOPs int64  `json:"flops"`
	Bytes int64  `json:"bytes"`
	// HostFLOPs, when not 0, is what the host flavour computes where its
	// form computes less than FLOPs, the lambdas' count (the scatter
	// form adds only the terms its condition selects), for the
	// simulator. Runtimes do not read it.
	HostFLOPs int64 `json:"host_flops,omitempty"`
	// GEMMs are the packed matrix products the host flavour computes in
	// a launch (a chain: its first kernel's, then its own), for the
	// simulator's contraction model (analysis/cost.SimulatePlan); none
	// for other kernels. Runtimes do not read them.
	GEMMs []GEMM `json:"gemms,omitempty"`
	// MathCalls are the calls a launch makes of each costly math
	// function (analysis/cost.CalibratedMath), for the simulator, which
	// prices them at the host's measured cost; none where it makes none.
	// Runtimes do not read them.
	MathCalls map[string]int64 `json:"math_calls,omitempty"`
}

// GEMM is the shape of a packed matrix product: for each of Batch
// indices, Rows × Cols outputs, each a sum of Depth products; Rows is
// the side the host's micro-kernel broadcasts (codegen/kernel.GEMM's A).
type GEMM struct {
	Batch int64 `json:"batch"`
	Rows  int64 `json:"rows"`
	Cols  int64 `json:"cols"`
	Depth int64 `json:"depth"`
	// RowsPacked and ColsPacked say that a side's factor was packed
	// with the weights, once: the launch reads it packed.
	RowsPacked bool `json:"rows_packed,omitempty"`
	ColsPacked bool `json:"cols_packed,omitempty"`
}

// OnHost reports whether the host runtime runs k's launches: every
// kernel but a GPU-only one.
func (k *Kernel) OnHost() bool { return !k.GPUOnly }

// OnGPU reports whether a GPU runtime (or the emulator) launches k: not a
// host-only kernel, and a grid of blocks (an empty output has none).
func (k *Kernel) OnGPU() bool { return !k.HostOnly && k.Grid > 0 }

// Arg is the type of a kernel argument.
type Arg struct {
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// Site is an access checked at run time.
type Site struct {
	Pos    string  `json:"pos"`
	Tensor string  `json:"tensor"`
	Shape  []int64 `json:"shape"`
}

// Buffer roles.
const (
	RoleInput      = "input"
	RoleParameter  = "parameter"
	RoleActivation = "activation"
	RoleGradient   = "gradient"
	RoleWorkspace  = "workspace"
	RoleOutput     = "output"
)

// Buffer is a region of a device's arena.
type Buffer struct {
	ID     int     `json:"id"`
	Name   string  `json:"name"`
	Device int     `json:"device"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Bytes  int64   `json:"bytes"`
	Role   string  `json:"role"`
	Offset int64   `json:"offset"` // in the device's arena
	// ViewOf is the buffer whose memory this one is a part of (-1: none).
	ViewOf int `json:"view_of"`
}

// Binding ties a named model input, parameter or output to its tiles:
// the buffers holding each box of it, on their devices.
type Binding struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Tiles []Tile  `json:"tiles"`
	// Classes, for an integer input that is the label of the training
	// loss, is the number of classes (labels lie in [0, Classes)), so
	// that `tofuc run --random-inputs` draws valid ones.
	Classes int64 `json:"classes,omitempty"`
}

// Tile is a box of a tensor held in a buffer.
type Tile struct {
	Buffer int   `json:"buffer"`
	Box    []Dim `json:"box"` // per dimension, the range it holds
}

// Dim is the half-open range [Lo, Hi) of one dimension.
type Dim struct {
	Lo int64 `json:"lo"`
	Hi int64 `json:"hi"`
}

// Step kinds.
const (
	Launch = "launch"
	Copy   = "copy"
	Reduce = "reduce"
	Opaque = "opaque"
	// Library: a vendor library's call on the host (GEMM or Conv), in a
	// placement group.
	Library = "library"
	// AllReduce: a collective step. Every member of a group of devices
	// has one, alike but for its To, and all of them meet: Order puts
	// the group's steps together, so that a runtime of one process per
	// device can run them as one collective call (MPI's, NCCL's).
	AllReduce = "all_reduce"
)

// Step is one thing a device does.
type Step struct {
	Op string `json:"op"`
	// Launch: the kernel and its buffers, in the kernel's argument order.
	Kernel int   `json:"kernel,omitempty"`
	Args   []int `json:"args,omitempty"`
	// Copy: the box Src of buffer From goes to offset At of buffer To
	// (boxes in the buffers' own coordinates).
	From int     `json:"from,omitempty"`
	Src  []Dim   `json:"src,omitempty"`
	To   int     `json:"to,omitempty"`
	At   []int64 `json:"at,omitempty"`
	// Reduce: every member of a group of devices combines the buffers
	// Parts (one per member, all alike) with Reducer into its own buffer
	// To; Kernel is a kernel that does it on one device, taking the parts
	// (copied there) and then To, for runtimes that reduce on a GPU.
	// AllReduce: the same fields; Group are the members' devices, one
	// per part (Parts[i] on device Group[i]), the parts combined in
	// this order on every member, so that every member's To holds the
	// same bits.
	Reducer string `json:"reducer,omitempty"`
	Parts   []int  `json:"parts,omitempty"`
	Group   []int  `json:"group,omitempty"`
	// Opaque: an opaque function called on the host, writing buffer To
	// (see OpaqueCall).
	Call *OpaqueCall `json:"call,omitempty"`
	// Library: the library's matrix product, or its convolution.
	GEMM *GEMMCall `json:"gemm,omitempty"`
	Conv *ConvCall `json:"conv,omitempty"`
	// Place, when not nil, makes the step one variant's of a placement
	// group: it runs only when that variant is in force.
	Place *Placed `json:"place,omitempty"`
	// After are the steps, on any device, that must end before this one
	// starts (besides the device's earlier steps).
	After []StepRef `json:"after,omitempty"`
	Label string    `json:"label,omitempty"`
	// Pos is the model's call site of what the step computes, for
	// messages ("file:line:col").
	Pos string `json:"pos,omitempty"`
}

// Where names step i of device d for messages: its place in the plan,
// what it does and, first, its call site in the model.
func (s *Step) Where(d, i int) string {
	w := fmt.Sprintf("device %d, step %d (%s %s)", d, i, s.Op, s.Label)
	if s.Pos != "" {
		w = s.Pos + ": " + w
	}
	return w
}

// Combines reports whether s combines parts with a reducer: a reduce or
// an all-reduce step, which runtimes without a collective library run
// alike.
func (s *Step) Combines() bool { return s.Op == Reduce || s.Op == AllReduce }

// StepRef names a step of a device's Steps (or Init, within Init).
type StepRef struct {
	Device int `json:"device"`
	Step   int `json:"step"`
}

// OpaqueCall is a batched call of an opaque function on the host: for
// every index b of the batch space Batch (row-major), argument i is the
// view of buffer Args[i] whose dimension d is fixed to b[Fixed[i][d]]
// when Fixed[i][d] >= 0 and passed whole when it is -1; the result, of
// shape Shape, goes to the step's buffer To at [b..., :].
type OpaqueCall struct {
	Fn    string    `json:"fn"`
	Batch []int64   `json:"batch"`
	Args  []int     `json:"args"`
	Fixed [][]int64 `json:"fixed"`
	Shape []int64   `json:"result_shape"`
}

// MaxPlanBytes bounds a plan's file: Read refuses a larger one before
// reading it (a plan of a large model is a few MiB; decoding one takes
// several times its size).
const MaxPlanBytes = 256 << 20

// Read loads a plan from a JSON file and checks it (Validate) and its
// seal, before any of its files is opened: a plan changed after it was
// written is refused.
func Read(path string) (*Plan, error) {
	b, err := safefile.ReadFile(path, MaxPlanBytes)
	if err != nil {
		return nil, err
	}
	return Decode(path, b)
}

// Decode checks and returns the plan of JSON b, read from path (for the
// messages), as Read does.
func Decode(path string, b []byte) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Seal != p.seal() {
		return nil, fmt.Errorf("%s was changed after tofuc compile wrote it (its contents do not match its seal): compile the plan again", path)
	}
	return &p, nil
}

// seal is the SHA-256 of the plan's JSON without its seal.
func (p *Plan) seal() string {
	q := *p
	q.Seal = ""
	return SealOf(&q)
}

// SealOf is the SHA-256 of v's JSON, in hex ("" if v has none): the seal
// of a file tofuc writes, computed with the seal field empty.
func SealOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Write saves a plan as indented JSON, sealed.
func (p *Plan) Write(path string) error {
	p.Seal = p.seal()
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return err
	}
	return safefile.WriteFile(path, append(b, '\n'), 0o644)
}
