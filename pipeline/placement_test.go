package pipeline_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tofuc/analysis/rounding"
	"tofuc/codegen"
	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/pipeline"
	"tofuc/runtime/cpu"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/hostlib"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// placedModel has two products, one with an epilogue (h of 1 MiB: a
// smaller one would have the schedule chain them into one launch, which
// is not offered).
const placedModel = `model placed(x: f32[256, 512]) {
    w1 = param f32[512, 1024]
    b1 = param f32[1024]
    w2 = param f32[1024, 256]
    h = relu(matmul(x, w1) + b1)
    return matmul(h, w2)
}
`

// shows records what a compile's progress shows.
type shows struct{ lines []string }

func (s *shows) Show(format string, args ...any) {
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}
func (s *shows) Count(string, int, int) {}

func (s *shows) timed() bool {
	return slices.ContainsFunc(s.lines, func(l string) bool { return strings.HasPrefix(l, "placement: timing") })
}

// TestPlacement: a compile offered the libraries found times every
// variant of each group, chooses one library and, in each group, it or
// the generated kernel, whichever is faster; says so in the report and
// keeps the times in the profile database, which a later compile of the
// same kernels reads instead of timing them; the plan's results match
// the interpreter.
func TestPlacement(t *testing.T) {
	m, backends, _ := loadPlaced(t)
	var first shows
	opts := pipeline.Options{Precision: precision.F32, Backends: backends, Emit: []string{"host", "report"}, Progress: &first}
	res, err := pipeline.Compile(m, filepath.Join(t.TempDir(), "out"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Placement) != 2 || !first.timed() {
		t.Fatalf("%d placement groups, timed %v: want 2, timed", len(res.Placement), first.timed())
	}
	libraries := map[string]bool{}
	for _, pg := range res.Placement {
		if len(pg.Millis) != len(backends)+1 {
			t.Errorf("%s: times %v, want one per candidate %v", pg.Label, pg.Millis, pg.Candidates)
		}
		for c, ms := range pg.Millis {
			if ms <= 0 {
				t.Errorf("%s: %s took %.3f ms", pg.Label, c, ms)
			}
		}
		if pg.Chosen != plan.Generated {
			libraries[pg.Chosen] = true
			if pg.Millis[pg.Chosen] >= pg.Millis[plan.Generated] {
				t.Errorf("%s: chose %s (%.3f ms) over the generated kernel's %.3f ms", pg.Label, pg.Chosen, pg.Millis[pg.Chosen], pg.Millis[plan.Generated])
			}
		}
	}
	if len(libraries) > 1 { // the mixed plan: every group on its fastest
		for _, pg := range res.Placement {
			for c, ms := range pg.Millis {
				if ms < pg.Millis[pg.Chosen] {
					t.Errorf("%s: the plan mixes libraries %v, and chose %s over the faster %s", pg.Label, libraries, pg.Chosen, c)
				}
			}
		}
	}
	report, err := os.ReadFile(filepath.Join(res.Dir, "report.txt"))
	if err != nil || !strings.Contains(string(report), "Placement") {
		t.Errorf("the report has no placement section (%v)", err)
	}
	if want := fmt.Sprintf(": 0 of %d parts' times from the profile database, the whole plans' measured", len(res.Placement)); !strings.Contains(string(report), want) {
		t.Errorf("the report does not say %q:\n%s", want, report)
	}
	written, err := plan.Read(filepath.Join(res.Dir, "plan.json"))
	if len(libraries) == 0 {
		// Every part generated: the plan without groups, as with no
		// library offered.
		if err != nil || len(written.Placement) != 0 || len(res.Plan.Placement) != 0 {
			t.Errorf("every part generated, and plan.json has %d placement groups (%v), want none", len(written.Placement), err)
		}
	} else if err != nil || !slices.EqualFunc(written.Placement, res.Placement, func(a, b plan.PlaceGroup) bool { return a.Chosen == b.Chosen }) {
		t.Errorf("plan.json does not hold the choices (%v)", err)
	}
	matchesInterp(t, res)

	var second shows
	opts.NoOptimize, opts.Progress = true, &second // a new compile, the same kernels
	again, err := pipeline.Compile(m, filepath.Join(t.TempDir(), "out"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Cached || second.timed() {
		t.Errorf("the second compile (cached %v) timed the groups again: %v", again.Cached, second.lines)
	}
	report, err = os.ReadFile(filepath.Join(again.Dir, "report.txt"))
	if want := fmt.Sprintf(": %d of %[1]d parts' times from the profile database, the whole plans' from the profile database", len(res.Placement)); err != nil || !strings.Contains(string(report), want) {
		t.Errorf("the second report does not say %q (%v)", want, err)
	}
	for g, pg := range again.Placement {
		if pg.Chosen != res.Placement[g].Chosen {
			t.Errorf("%s: the profile database's choice %s differs from the measured %s", pg.Label, pg.Chosen, res.Placement[g].Chosen)
		}
	}
	t.Run("missing library", func(t *testing.T) { missingLibrary(t, res, backends) })
}

// matchesInterp runs the compiled plan of res on the cpu runtime
// against the interpreter, on random inputs, under the f32 mode's
// tolerance.
func matchesInterp(t *testing.T, res *pipeline.Result) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	x := tensor.New(lang.F32, []int{256, 512})
	for i := range x.F {
		x.F[i] = r.NormFloat64()
	}
	in := map[string]*tensor.Tensor{"x": x}
	want, err := exec.Run(res.Graph, exec.Interp{}, in, res.Params, 1)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := executor.Open(res.Plan, res.Dir, cpu.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	got, err := pr.Run(in, res.Params)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want.Outputs {
		if err := rounding.CompareModel(precision.F32, 2, got[name], w); err != nil {
			t.Errorf("output %s: %v", name, err)
		}
	}
}

// missingLibrary: a plan whose groups chose a library this host cannot
// load (renamed "nolib") runs the generated kernels instead, says so in
// one note, and its results still match. The plan is res's graph's,
// compiled with its placement groups whatever placement chose.
func missingLibrary(t *testing.T, placed *pipeline.Result, backends []string) {
	dir := t.TempDir()
	c, err := codegen.Compile(placed.Graph, dir, codegen.Options{Emit: []string{"host"}, Precision: precision.F32, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	res := &pipeline.Result{Plan: c.Plan, Dir: dir, Graph: placed.Graph, Params: placed.Params}
	if len(res.Plan.Placement) == 0 {
		t.Fatal("the plan has no placement groups")
	}
	from := res.Plan.Placement[0].Candidates[0]
	rename := func(names []string) {
		for i, n := range names {
			if n == from {
				names[i] = "nolib"
			}
		}
	}
	for g := range res.Plan.Placement {
		rename(res.Plan.Placement[g].Candidates)
		res.Plan.Placement[g].Chosen = "nolib"
	}
	for _, s := range res.Plan.Steps[0] {
		if s.Place != nil {
			rename(s.Place.Variants)
		}
		if s.GEMM != nil && s.GEMM.Backend == from {
			s.GEMM.Backend = "nolib"
		}
	}
	pr, err := executor.Open(res.Plan, res.Dir, cpu.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := pr.Notes
	pr.Close()
	if len(notes) != 1 || !strings.Contains(notes[0], "nolib") || !strings.Contains(notes[0], "generated kernels instead") {
		t.Errorf("notes %q: want one saying that the steps placed on nolib run the generated kernels", notes)
	}
	matchesInterp(t, res)
}

// TestPlacementBesideGPULibraries: offered the host's libraries and
// cuBLAS together (which the compile cannot load or time), a compile
// times the host's candidates only, gives every group a cuBLAS step, and
// keeps the groups for the GPU whatever the host chose; its results
// match the interpreter.
func TestPlacementBesideGPULibraries(t *testing.T) {
	m, backends, _ := loadPlaced(t)
	opts := pipeline.Options{Precision: precision.F32, Backends: append(slices.Clone(backends), plan.CUBLAS), Emit: []string{"host", "ptx", "report"}, Progress: &shows{}}
	res, err := pipeline.Compile(m, filepath.Join(t.TempDir(), "out"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Placement) != 2 {
		t.Fatalf("%d placement groups in the plan, want 2", len(res.Plan.Placement))
	}
	for _, pg := range res.Plan.Placement {
		if !slices.Contains(pg.Candidates, plan.CUBLAS) || len(pg.Millis) != len(backends)+1 || pg.Millis[plan.CUBLAS] != 0 {
			t.Errorf("%s: candidates %v, times %v: want cuBLAS among the candidates, untimed, and the host's timed", pg.Label, pg.Candidates, pg.Millis)
		}
	}
	matchesInterp(t, res)
}

// TestPlacementWithOneGroupMissing: with one group's profile entry
// gone, placement times every group and the whole plans again, and the
// report says so (it said the other groups' times came from the
// profile database, and reused whole-plan times of the old groups).
func TestPlacementWithOneGroupMissing(t *testing.T) {
	m, backends, cache := loadPlaced(t)
	opts := pipeline.Options{Precision: precision.F32, Backends: backends, Emit: []string{"host", "report"}, Progress: &shows{}}
	if _, err := pipeline.Compile(m, filepath.Join(t.TempDir(), "out"), opts); err != nil {
		t.Fatal(err)
	}
	var groupEntries []string
	err := filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "profile-") && !strings.HasPrefix(d.Name(), "profile-plan-") {
			groupEntries = append(groupEntries, p)
		}
		return err
	})
	if err != nil || len(groupEntries) < 2 {
		t.Fatalf("%d group entries in the profile database (%v), want 2 or more", len(groupEntries), err)
	}
	if err := os.Remove(groupEntries[0]); err != nil {
		t.Fatal(err)
	}
	opts.NoOptimize = true // a new compile, the same kernels
	again, err := pipeline.Compile(m, filepath.Join(t.TempDir(), "out"), opts)
	if err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile(filepath.Join(again.Dir, "report.txt"))
	if want := fmt.Sprintf(": 0 of %d parts' times from the profile database, the whole plans' measured", len(again.Placement)); err != nil || !strings.Contains(string(report), want) {
		t.Errorf("the report does not say %q (%v):\n%s", want, err, report)
	}
}

// loadPlaced loads placedModel with a compile cache of its own, and the
// library backends here; it skips the test where there are none.
func loadPlaced(t *testing.T) (m *pipeline.Model, backends []string, cache string) {
	backends = hostlib.Available()
	if len(backends) == 0 {
		t.Skip("no library backend on this machine (libopenblas0-pthread, libdnnl2)")
	}
	cache = t.TempDir()
	t.Setenv("TOFUC_CACHE", cache)
	path := filepath.Join(t.TempDir(), "placed.tdl")
	if err := os.WriteFile(path, []byte(placedModel), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := pipeline.Load(path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, backends, cache
}

// TestUnofferedGPULibrariesSaid: a GPU library named where no step of
// it is made is said, in one line each: in the exact mode (the choices
// checked), in bf16 and without the PTX (a compile).
func TestUnofferedGPULibrariesSaid(t *testing.T) {
	var said strings.Builder
	old := toolchain.Warnings
	toolchain.Warnings = &said
	defer func() { toolchain.Warnings = old }()
	if _, err := (pipeline.Choices{Devices: 1, Precision: precision.Exact, Backends: []string{plan.CUBLAS, plan.CUDNN}}).Options(); err != nil {
		t.Fatal(err)
	}
	m, _, _ := loadPlaced(t)
	for _, tc := range []struct {
		mode precision.Mode
		emit []string
	}{{precision.BF16, []string{"host", "ptx"}}, {precision.F32, []string{"host"}}} {
		opts := pipeline.Options{Precision: tc.mode, Backends: []string{plan.CUBLAS}, Emit: tc.emit, Progress: &shows{}}
		if _, err := pipeline.Compile(m, filepath.Join(t.TempDir(), "out"), opts); err != nil {
			t.Fatal(err)
		}
	}
	want := `tofuc: --backends cublas: no cublas step: the GPU's libraries compute f32 and tf32, not exact
tofuc: --backends cudnn: no cudnn step: the GPU's libraries compute f32 and tf32, not exact
tofuc: --backends cublas: no cublas step: the GPU's libraries compute f32 and tf32, not bf16
tofuc: --backends cublas: no cublas step: the PTX is not built (--emit)
`
	if said.String() != want {
		t.Errorf("said:\n%s\nwant:\n%s", said.String(), want)
	}
}
