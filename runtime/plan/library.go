package plan

import (
	"fmt"
	"math"
	"slices"

	"tofuc/lang"
)

// Generated is the variant of a placement group that runs tofuc's own
// kernels. Every group has it, so that every kind of device can run
// every plan (a GPU runs it, and a host whose library is missing).
const Generated = "generated"

// CUBLAS and CUDNN are the backends of library steps that cuBLAS
// (products) and cuDNN (convolutions) run on a GPU. GPUBackends are the
// backends of a GPU's libraries, which the GPU runtime loads where the
// plan runs (runtime/cuda); the others are the host's (runtime/hostlib).
const (
	CUBLAS = "cublas"
	CUDNN  = "cudnn"
)

var GPUBackends = []string{CUBLAS, CUDNN}

// IsGPUBackend reports whether backend is a GPU's library.
func IsGPUBackend(backend string) bool { return slices.Contains(GPUBackends, backend) }

// HostCandidates are a group's candidates a host runs: Generated and
// the host libraries'.
func (pg *PlaceGroup) HostCandidates() []string {
	return slices.DeleteFunc(slices.Clone(pg.Candidates), IsGPUBackend)
}

// PlaceGroup is a part of the plan that can run on several backends
// (docs/placement.md): tofuc's generated kernel, or a vendor library's
// call followed by a generated epilogue. Its steps carry Place.
type PlaceGroup struct {
	Label string `json:"label"`
	Pos   string `json:"pos,omitempty"`
	// Candidates are the variants the plan holds steps for, Generated
	// among them; Chosen is the one a host that has its library runs.
	Candidates []string `json:"candidates"`
	Chosen     string   `json:"chosen"`
	// Millis is each candidate's measured time in milliseconds, when the
	// placement measured them.
	Millis map[string]float64 `json:"millis,omitempty"`
}

// Placed marks a step of placement group Group that runs only when the
// group's variant in force is one of Variants.
type Placed struct {
	Group    int      `json:"group"`
	Variants []string `json:"variants"`
}

// Runs reports whether a step placed so runs when inForce[g] is group
// g's variant in force (an unplaced step always runs).
func (pl *Placed) Runs(inForce []string) bool {
	return pl == nil || slices.Contains(pl.Variants, inForce[pl.Group])
}

// GEMMCall is a library's strided, batched single-precision matrix
// product: for every index b of Batch (row-major), C[b] = A[b]·B[b], of
// M×K by K×N matrices, where element (i, j) of X[b] is element
// X.Offset + Σ b[d]·X.Batch[d] + i·X.Row + j·X.Col of X's buffer.
type GEMMCall struct {
	Backend string  `json:"backend"`
	M       int64   `json:"m"`
	N       int64   `json:"n"`
	K       int64   `json:"k"`
	Batch   []int64 `json:"batch"`
	A       Matrix  `json:"a"`
	B       Matrix  `json:"b"`
	C       Matrix  `json:"c"`
}

// Matrix is where an operand of a GEMMCall lies in its buffer, in
// elements.
type Matrix struct {
	Buffer int     `json:"buffer"`
	Offset int64   `json:"offset"`
	Row    int64   `json:"row"`
	Col    int64   `json:"col"`
	Batch  []int64 `json:"batch"`
}

// EntryOffset is the offset, in elements, of the matrix's batch entry
// idx in its buffer.
func (m *Matrix) EntryOffset(idx []int) int64 {
	off := m.Offset
	for d, i := range idx {
		off += int64(i) * m.Batch[d]
	}
	return off
}

// ForEachEntry calls f with the index of every batch entry of the
// call, in row-major order (once, with no index, without a batch).
func (c *GEMMCall) ForEachEntry(f func(idx []int)) {
	idx := make([]int, len(c.Batch))
	for {
		f(idx)
		d := len(idx) - 1
		for ; d >= 0; d-- {
			if idx[d]++; int64(idx[d]) < c.Batch[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// maxBLASDim bounds every extent, stride and offset of a GEMMCall: BLAS
// libraries take them as C ints (and their sums then stay far from
// int64's range).
const maxBLASDim = math.MaxInt32

// Transposed is the call that computes c's result transposed, Cᵀ =
// Bᵀ·Aᵀ, in the same memory: its A is c's B transposed, its B c's A.
func (c *GEMMCall) Transposed() *GEMMCall {
	t := func(m Matrix) Matrix {
		m.Row, m.Col = m.Col, m.Row
		return m
	}
	return &GEMMCall{Backend: c.Backend, M: c.N, N: c.M, K: c.K, Batch: c.Batch, A: t(c.B), B: t(c.A), C: t(c.C)}
}

// Operands are the call's matrices with their extents.
func (c *GEMMCall) Operands() [3]Operand {
	return [3]Operand{{"a", &c.A, c.M, c.K}, {"b", &c.B, c.K, c.N}, {"c", &c.C, c.M, c.N}}
}

// Operand is a matrix of a call and its extents.
type Operand struct {
	Name       string
	Matrix     *Matrix
	Rows, Cols int64
}

// Layout is how a BLAS library reads an operand: row-major with leading
// dimension LD, transposed when Trans (its transpose is row-major). ok
// is false when neither of its strides is one (for an extent above one)
// or its rows would overlap.
func (o Operand) Layout() (trans bool, ld int64, ok bool) {
	m := o.Matrix
	switch {
	case o.Cols == 1 && o.Rows == 1:
		return false, 1, true
	case m.Col == 1 || o.Cols == 1:
		if o.Rows == 1 {
			return false, o.Cols, true
		}
		return false, m.Row, m.Row >= o.Cols
	case m.Row == 1 || o.Rows == 1:
		return true, m.Col, m.Col >= o.Rows
	}
	return false, 0, false
}

// span is one more than the largest offset an operand's batch entry
// reaches from its start.
func (o Operand) span() int64 {
	return 1 + (o.Rows-1)*o.Matrix.Row + (o.Cols-1)*o.Matrix.Col
}

// LibraryCall is what a library step asks of its library: a GEMMCall
// or a ConvCall.
type LibraryCall interface {
	Library() string // the backend
	Name() string    // what it computes, for timings ("sgemm")
	Check() error
	FLOPs() int64
	Bytes() int64
}

// LibraryCall is library step s's call, nil for other steps.
func (s *Step) LibraryCall() LibraryCall {
	switch {
	case s.GEMM != nil:
		return s.GEMM
	case s.Conv != nil:
		return s.Conv
	}
	return nil
}

// LibraryBuffers are library step s's operands' buffers: a GEMM's A, B
// and C, or a convolution's X, W and Y, then its post-ops' bias if any.
// The third is the one written.
func (s *Step) LibraryBuffers() []int {
	if c := s.GEMM; c != nil {
		return []int{c.A.Buffer, c.B.Buffer, c.C.Buffer}
	}
	c := s.Conv
	out := []int{c.X.Buffer, c.W.Buffer, c.Y.Buffer}
	if c.Post != nil && c.Post.Bias != nil {
		out = append(out, c.Post.Bias.Buffer)
	}
	return out
}

func (c *GEMMCall) Library() string { return c.Backend }
func (c *GEMMCall) Name() string    { return "sgemm" }
func (c *ConvCall) Library() string { return c.Backend }
func (c *ConvCall) Name() string    { return "convolution" }

// FLOPs are the product's multiplications and additions.
func (c *GEMMCall) FLOPs() int64 {
	batch, _ := Cells(c.Batch)
	return 2 * c.M * c.N * c.K * batch
}

// Bytes are the bytes of its matrices.
func (c *GEMMCall) Bytes() int64 {
	batch, _ := Cells(c.Batch)
	var n int64
	for _, o := range c.Operands() {
		n += 4 * o.Rows * o.Cols * batch
	}
	return n
}

// checkLibrary checks a library step of device d: its one call
// (Check), in a placement group's library variants only (never the
// generated one, which every device runs), and each operand an f32
// buffer of the device that holds every element the call reads or
// writes.
func (p *Plan) checkLibrary(d int, s *Step) error {
	if (s.GEMM == nil) == (s.Conv == nil) || s.Place == nil {
		return fmt.Errorf("a library step needs one call (gemm or conv) and a placement group")
	}
	if slices.Contains(s.Place.Variants, Generated) {
		return fmt.Errorf("a library step in the %q variant, which every device runs", Generated)
	}
	if err := s.LibraryCall().Check(); err != nil {
		return err
	}
	if err := s.checkGPULibrary(); err != nil {
		return err
	}
	if s.Conv != nil {
		return p.checkConv(d, s.Conv)
	}
	for _, o := range s.GEMM.Operands() {
		if err := p.checkOperand(d, s.GEMM, o); err != nil {
			return fmt.Errorf("gemm.%s: %w", o.Name, err)
		}
	}
	return nil
}

// checkGPULibrary refuses a GPU library's step that its library cannot
// compute: cuBLAS computes products, cuDNN convolutions it can pad
// (ConvCall.RunsOnCUDNN). The host's libraries are checked when they
// load (runtime/hostlib).
func (s *Step) checkGPULibrary() error {
	switch c := s.LibraryCall(); {
	case c.Library() == CUBLAS && s.GEMM == nil, c.Library() == CUDNN && s.Conv == nil:
		return fmt.Errorf("%s computes no %s", c.Library(), c.Name())
	case c.Library() == CUDNN && !s.Conv.RunsOnCUDNN():
		return fmt.Errorf("cudnn cannot compute the convolution with pads %v and %v", s.Conv.PadsBegin, s.Conv.PadsEnd)
	}
	return nil
}

// Check checks a call apart from its buffers: a library, extents from 1
// and strides from 0 within a C int, a BLAS layout for each operand and
// the result's batch entries disjoint.
func (c *GEMMCall) Check() error {
	if c.Backend == "" || c.Backend == Generated {
		return fmt.Errorf("gemm.backend %q names no library", c.Backend)
	}
	for _, n := range append([]int64{c.M, c.N, c.K}, c.Batch...) {
		if n < 1 || n > maxBLASDim {
			return fmt.Errorf("gemm: extent %d out of [1, %d]", n, maxBLASDim)
		}
	}
	if _, err := Cells(c.Batch); err != nil {
		return fmt.Errorf("gemm.batch: %w", err)
	}
	for _, o := range c.Operands() {
		m := o.Matrix
		if len(m.Batch) != len(c.Batch) {
			return fmt.Errorf("gemm.%s: %d batch strides for %d batch dimensions", o.Name, len(m.Batch), len(c.Batch))
		}
		for _, v := range append([]int64{m.Offset, m.Row, m.Col}, m.Batch...) {
			if v < 0 || v > maxBLASDim {
				return fmt.Errorf("gemm.%s: offset or stride %d out of [0, %d]", o.Name, v, maxBLASDim)
			}
		}
		if _, _, ok := o.Layout(); !ok {
			return fmt.Errorf("gemm.%s: strides %d (rows) and %d (columns) of a %d×%d matrix: none is one, or the rows overlap", o.Name, m.Row, m.Col, o.Rows, o.Cols)
		}
	}
	return disjointBatch(c.C.Batch, c.Batch, c.Operands()[2].span())
}

// checkOperand checks that operand o of call c (checked) lies in an f32
// buffer of device d.
func (p *Plan) checkOperand(d int, c *GEMMCall, o Operand) error {
	m := o.Matrix
	b, err := p.f32Buffer(d, m.Buffer)
	if err != nil {
		return err
	}
	last := m.Offset + o.span() - 1 // each term below 2^62: no overflow
	for i, n := range c.Batch {
		last = min(last, math.MaxInt64-maxBLASDim*maxBLASDim) + (n-1)*m.Batch[i]
	}
	if n, err := Cells(b.Shape); err != nil || last >= n {
		return fmt.Errorf("reaches element %d of buffer %d (%s, shape %v)", last, m.Buffer, b.Name, b.Shape)
	}
	return nil
}

// f32Buffer is buffer id, which a library call of device d reads or
// writes: an error unless it is an f32 buffer of d.
func (p *Plan) f32Buffer(d, id int) (Buffer, error) {
	b, err := p.buffer(id)
	if err != nil {
		return Buffer{}, err
	}
	if b.Device != d || b.DType != lang.F32.String() {
		return Buffer{}, fmt.Errorf("buffer %d is %s on device %d, not f32 on device %d", id, b.DType, b.Device, d)
	}
	return b, nil
}

// disjointBatch reports an error when two batch entries of a result,
// each span elements long, may share an element: taken by stride, each
// batch dimension of more than one entry must step past all that the
// dimensions before it reach.
func disjointBatch(strides, extents []int64, span int64) error {
	order := make([]int, 0, len(extents))
	for i, n := range extents {
		if n > 1 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return int(strides[a] - strides[b]) })
	reach := span
	for _, i := range order {
		if strides[i] < reach {
			return fmt.Errorf("gemm.c: batch stride %d of dimension %d is within the %d elements before it: results overlap", strides[i], i, reach)
		}
		reach = strides[i]*(extents[i]-1) + reach
	}
	return nil
}

// checkPlacement checks the placement groups and every step's group.
// Only a plan of one device offers a GPU's libraries: they keep one
// handle and one workspace per convolution for a GPU's context, which
// two logical devices' streams on one GPU would share.
func (p *Plan) checkPlacement() error {
	for g, pg := range p.Placement {
		if p.Devices > 1 && slices.ContainsFunc(pg.Candidates, IsGPUBackend) {
			return fmt.Errorf("placement group %d (%s): a GPU's library in a plan of %d devices: only a plan of one device offers them", g, pg.Label, p.Devices)
		}
		if !slices.Contains(pg.Candidates, Generated) || !slices.Contains(pg.Candidates, pg.Chosen) {
			return fmt.Errorf("placement group %d (%s): candidates %v must hold %q and the chosen %q", g, pg.Label, pg.Candidates, Generated, pg.Chosen)
		}
	}
	for _, lists := range [][][]Step{p.Init, p.Steps} {
		for d, steps := range lists {
			for i, s := range steps {
				if s.Place == nil {
					continue
				}
				if s.Place.Group < 0 || s.Place.Group >= len(p.Placement) {
					return fmt.Errorf("%s: placement group %d does not exist", s.Where(d, i), s.Place.Group)
				}
				for _, v := range s.Place.Variants {
					if !slices.Contains(p.Placement[s.Place.Group].Candidates, v) {
						return fmt.Errorf("%s: variant %q is no candidate of its group", s.Where(d, i), v)
					}
				}
			}
		}
	}
	return nil
}

// InForce returns each placement group's chosen variant, or Generated
// where can says the device cannot run it.
func (p *Plan) InForce(can func(variant string) bool) []string {
	out := make([]string, len(p.Placement))
	for g, pg := range p.Placement {
		out[g] = Generated
		if pg.Chosen != Generated && can(pg.Chosen) {
			out[g] = pg.Chosen
		}
	}
	return out
}

// FirstCandidates is, for every group, its first candidate other than
// Generated that can run (can), else Generated: the variants of a
// device whose libraries the compile could not time (a GPU's).
func (p *Plan) FirstCandidates(can func(variant string) bool) []string {
	out := make([]string, len(p.Placement))
	for g, pg := range p.Placement {
		out[g] = Generated
		for _, c := range pg.Candidates {
			if c != Generated && can(c) {
				out[g] = c
				break
			}
		}
	}
	return out
}

// BLASLayout is a GEMMCall as a row-major BLAS computes it: C = A·B,
// or, where the call's C is column-major, Cᵀ = Bᵀ·Aᵀ (Swapped: its A
// and B are the call's B and A buffers); each operand transposed or
// not, and its leading dimension (Operand.Layout).
type BLASLayout struct {
	A, B, C        Operand
	Swapped        bool
	TransA, TransB bool
	LDA, LDB, LDC  int64
}

// BLAS is the call's BLASLayout.
func (c *GEMMCall) BLAS() BLASLayout {
	ops := c.Operands()
	l := BLASLayout{A: ops[0], B: ops[1], C: ops[2]}
	if trans, _, _ := l.C.Layout(); trans {
		l.A, l.B, l.C, l.Swapped = ops[1].Transposed(), ops[0].Transposed(), ops[2].Transposed(), true
	}
	l.TransA, l.LDA, _ = l.A.Layout()
	l.TransB, l.LDB, _ = l.B.Layout()
	_, l.LDC, _ = l.C.Layout()
	return l
}

// Transposed is the operand's transpose: the same elements, rows and
// columns exchanged.
func (o Operand) Transposed() Operand {
	m := *o.Matrix
	m.Row, m.Col = m.Col, m.Row
	return Operand{o.Name, &m, o.Cols, o.Rows}
}
