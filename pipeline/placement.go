package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"tofuc/analysis/report"
	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/runtime/cpu"
	"tofuc/runtime/executor"
	"tofuc/runtime/hostlib"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// placementRuns is how many timed runs of each variant the placement
// takes the median of (each after a warm-up).
const placementRuns = 5

// ResolveBackends turns --backends' list into the libraries offered
// (none unless offer: the exact mode offers none, and only checks the
// names): "all" is every host library that loads here, "none" (or
// "generated") none; a named host library must load, or the error says
// why; a GPU's is loaded where the plan runs.
func ResolveBackends(list []string, offer bool) ([]string, error) {
	var out []string
	for _, name := range list {
		switch {
		case name == "none" || name == plan.Generated:
		case !offer && (name == "all" || plan.IsGPUBackend(name) || slices.Contains(hostlib.Names(), name)):
		case name == "all":
			out = append(out, hostlib.Available()...)
		case plan.IsGPUBackend(name):
			out = append(out, name)
		case slices.Contains(hostlib.Names(), name):
			if _, err := hostlib.Open(name); err != nil {
				return nil, err
			}
			out = append(out, name)
		default:
			return nil, fmt.Errorf("no backend %q (known: all, none, %s)", name, strings.Join(slices.Concat(hostlib.Names(), plan.GPUBackends), ", "))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// place chooses each placement group's variant of plan p, compiled
// into dir, by measured time on this host (docs/placement.md), then
// rewrites the plan with the choices and returns the report's placement
// section. First each group's candidates are timed (or read from the
// profile database); then each library's plan (the library in every
// group it beats the generated kernel in), the mixed plan (planChoices)
// and the generated plan are timed whole, and the fastest of those
// plans is the choice.
func place(p *plan.Plan, dir string, params map[string]*tensor.Tensor, opts Options) (report.Section, error) {
	prog := opts.progress()
	tools, err := toolchain.Find()
	if err != nil {
		return report.Section{}, err
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	inputs := placementInputs(p)
	keys := make([]string, len(p.Placement))
	cost := placementCost{}
	for g := range p.Placement {
		keys[g] = profileKey(p, g, tools, threads)
		if t, ok := lookupProfile(tools, keys[g]); ok && len(t) == len(p.Placement[g].HostCandidates()) {
			p.Placement[g].Millis = t
			cost.GroupsKnown++
		}
	}
	measured := cost.GroupsKnown < len(p.Placement)
	if measured { // every group again, timed in the same runs
		cost.GroupsKnown = 0
		prog.Show("placement: timing %d groups on %d backends", len(p.Placement), len(candidates(p)))
		if err := measure(p, dir, inputs, params, threads); err != nil {
			return report.Section{}, fmt.Errorf("placement: %w", err)
		}
		for g, pg := range p.Placement {
			storeProfile(tools, keys[g], pg.Millis)
		}
	}
	// Plans whose groups were just timed are timed again: their stored
	// times were of the plans the old group times made.
	planKey := wholePlanKey(p, keys)
	walls, ok := lookupProfile(tools, planKey)
	cost.PlansKnown = ok && !measured && timesAll(walls, planChoices(p))
	if !cost.PlansKnown {
		prog.Show("placement: timing the plan with each library")
		if walls, err = planTimes(p, dir, inputs, params, threads); err != nil {
			return report.Section{}, fmt.Errorf("placement: %w", err)
		}
		storeProfile(tools, planKey, walls)
	}
	choose(p, walls)
	if err := p.Write(filepath.Join(dir, "plan.json")); err != nil {
		return report.Section{}, err
	}
	cost.Seconds = time.Since(start).Seconds()
	return placementSection(p, threads, walls, cost), nil
}

// timesAll reports whether walls holds a time for each of plans.
func timesAll(walls map[string]float64, plans []string) bool {
	for _, name := range plans {
		if _, ok := walls[name]; !ok {
			return false
		}
	}
	return true
}

// placementCost is what a placement took: its time, and what it found
// in the profile database instead of measuring.
type placementCost struct {
	Seconds     float64 `json:"seconds"`
	GroupsKnown int     `json:"groups_known"` // groups whose times the database held
	PlansKnown  bool    `json:"plans_known"`  // whether it held the whole plans' times
}

// String says the cost in a line of the report.
func (c placementCost) String(groups int) string {
	plans := "measured"
	if c.PlansKnown {
		plans = "from the profile database"
	}
	return fmt.Sprintf("placement took %.2f s: %d of %d parts' times from the profile database, the whole plans' %s", c.Seconds, c.GroupsKnown, groups, plans)
}

// wholePlanKey keys the whole plan's times in the profile database: its
// groups' keys (the machine, the threads, the groups' steps) and every
// other step's kernel, in order, for the work around the groups is
// what a whole plan's timing measures.
func wholePlanKey(p *plan.Plan, groupKeys []string) string {
	h := sha256.New()
	fmt.Fprintln(h, strings.Join(groupKeys, "\n"))
	for _, lists := range [][][]plan.Step{p.Init, p.Steps} {
		for _, steps := range lists {
			for _, s := range steps {
				name := s.Op
				if s.Op == plan.Launch || s.Combines() {
					name += " " + p.Kernels[s.Kernel].Name
				}
				fmt.Fprintln(h, name)
			}
		}
	}
	return "profile-plan-" + hex.EncodeToString(h.Sum(nil))
}

// mixed is the whole plan with each group on its own fastest variant,
// libraries mixed. Timed whole beside each library's plan, it wins only
// where the groups it moves gain more than the libraries' threads cost
// each other (GEMMs on OpenBLAS and convolutions on oneDNN).
const mixed = "mixed"

// assign puts every group on library lib where its measured time beats
// the generated kernel's, on the generated kernel elsewhere; for mixed,
// every group on its fastest variant.
func assign(p *plan.Plan, lib string) {
	for g := range p.Placement {
		pg := &p.Placement[g]
		if lib == mixed {
			pg.Chosen = fastest(pg)
			continue
		}
		pg.Chosen = plan.Generated
		if ms, ok := pg.Millis[lib]; ok && ms < pg.Millis[plan.Generated] {
			pg.Chosen = lib
		}
	}
}

// fastest is group pg's variant of least measured time (the generated
// kernel, then the first of its candidates, among equals).
func fastest(pg *plan.PlaceGroup) string {
	best := plan.Generated
	for _, c := range pg.Candidates {
		if ms, ok := pg.Millis[c]; ok && ms < pg.Millis[best] {
			best = c
		}
	}
	return best
}

// planChoices are the whole plans placement times: the generated one,
// each library's, and the mixed one where it puts groups on two
// libraries or more (otherwise it is one library's plan).
func planChoices(p *plan.Plan) []string {
	out := candidates(p)
	libs := map[string]bool{}
	for g := range p.Placement {
		if f := fastest(&p.Placement[g]); f != plan.Generated {
			libs[f] = true
		}
	}
	if len(libs) > 1 {
		out = append(out, mixed)
	}
	return out
}

// choose assigns the groups as the plan that, timed whole, was fastest
// (walls: each of planChoices, in ms): the generated one, a library's,
// or the mixed one. A plan is timed whole rather than added up from its
// groups: a library's threads slow the work around its calls
// (OpenBLAS's spin after a call, oneDNN's OpenMP threads start the
// next), which timing the groups alone does not show
// (docs/placement.md). A library's plan must beat the generated one by
// libraryMargin to be chosen.
func choose(p *plan.Plan, walls map[string]float64) {
	best, bar := plan.Generated, walls[plan.Generated]*(1-libraryMargin)
	for _, lib := range planChoices(p)[1:] {
		if ms, ok := walls[lib]; ok && ms < bar {
			best, bar = lib, ms
		}
	}
	assign(p, best)
}

// libraryMargin is how much faster than the generated plan, as a
// fraction of its time, a library's plan must be timed to be chosen:
// a smaller gain is within what the compile's timing and a later run
// disagree by on a shared machine, and a library's plan has costs the
// timing misses (its threads beside the caller's work). MobileNetV2 with
// every library ran 2.54 times ONNX Runtime's time, without them 2.27
// (docs/benchmarks.md).
const libraryMargin = 0.05

// planTimes times plan p whole with each of planChoices (each library's
// assignment, the mixed one, the generated kernels alone) (alternately: timeVariants), and returns
// each one's median time in ms.
func planTimes(p *plan.Plan, dir string, inputs, params map[string]*tensor.Tensor, threads int) (map[string]float64, error) {
	runs := map[string][]float64{}
	err := timeVariants(p, dir, threads, planChoices(p), func(lib string) { assign(p, lib) }, func(lib string, pr *executor.Program) error {
		t, err := pr.Bench(inputs, params, 1)
		if err == nil {
			runs[lib] = append(runs[lib], t.Plan.Median*1e3)
		}
		return err
	})
	walls := map[string]float64{}
	for lib, ms := range runs {
		walls[lib] = median(ms)
	}
	return walls, err
}

// timeVariants loads plan p on the cpu runtime once per variant
// (inForce(v) setting the groups before each load), then calls run
// placementRuns rounds, each candidate's program once in turn: run
// times it with Bench, which warms it up first (so that a library's
// threads left spinning by the candidate before do not slow the run
// timed) and allocates nothing while it times (the compile's large heap
// would have the garbage collector take a core). Alternating, the
// candidates share the load of a busy machine alike: timed one after the
// other, one could take a quiet minute and another a busy one.
func timeVariants(p *plan.Plan, dir string, threads int, variants []string, inForce func(variant string), run func(variant string, pr *executor.Program) error) error {
	progs := make([]*executor.Program, 0, len(variants))
	defer func() {
		for _, pr := range progs {
			pr.Close()
		}
	}()
	for _, v := range variants {
		inForce(v)
		pr, err := executor.Open(p, dir, cpu.Kind.Name, executor.Options{Threads: threads})
		if err != nil {
			return err
		}
		progs = append(progs, pr)
		if len(pr.Notes) > 0 {
			return fmt.Errorf("%s", strings.Join(pr.Notes, "; "))
		}
	}
	runtime.GC() // the compile's garbage, before the timing
	for range placementRuns {
		for i, pr := range progs {
			if err := run(variants[i], pr); err != nil {
				return fmt.Errorf("timing the %s variants: %w", variants[i], err)
			}
		}
	}
	return nil
}

// candidates are the variants of p's groups that the host times,
// Generated first (a GPU's libraries are timed where the plan runs).
func candidates(p *plan.Plan) []string {
	out := []string{plan.Generated}
	for _, pg := range p.Placement {
		for _, c := range pg.HostCandidates() {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// measure times every group of p in every variant: the plan run on the
// cpu runtime with each variant in force wherever a group has it
// (alternately: timeVariants), a group's time the median over runs of
// the sum of its steps' times.
func measure(p *plan.Plan, dir string, inputs, params map[string]*tensor.Tensor, threads int) error {
	sums := map[string][][]float64{} // per variant, per group, the runs
	inForce := func(variant string) {
		for g := range p.Placement {
			p.Placement[g].Chosen = plan.Generated
			if slices.Contains(p.Placement[g].Candidates, variant) {
				p.Placement[g].Chosen = variant
			}
		}
	}
	err := timeVariants(p, dir, threads, candidates(p), inForce, func(variant string, pr *executor.Program) error {
		t, err := pr.Bench(inputs, params, 1)
		if err != nil {
			return err
		}
		run := make([]float64, len(p.Placement))
		for _, k := range t.Kernels {
			if pl := p.Steps[k.Device][k.Step].Place; pl != nil {
				run[pl.Group] += k.Time.Median * 1e3
			}
		}
		if sums[variant] == nil {
			sums[variant] = make([][]float64, len(p.Placement))
		}
		for g, ms := range run {
			sums[variant][g] = append(sums[variant][g], ms)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for g := range p.Placement {
		p.Placement[g].Millis = map[string]float64{}
		for _, c := range p.Placement[g].HostCandidates() {
			p.Placement[g].Millis[c] = median(sums[c][g])
		}
	}
	return nil
}

// placementInputs are inputs to time p on: floats drawn at random,
// integers zero (a valid index and label).
func placementInputs(p *plan.Plan) map[string]*tensor.Tensor {
	r := rand.New(rand.NewPCG(1, 2))
	out := map[string]*tensor.Tensor{}
	for _, b := range p.Inputs {
		shape := make([]int, len(b.Shape))
		for i, n := range b.Shape {
			shape[i] = int(n)
		}
		t := tensor.New(lang.ParseDType(b.DType), shape)
		if t.DType.IsFloat() {
			for i := range t.F {
				t.F[i] = r.NormFloat64()
			}
		}
		out[b.Name] = t
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// profileKey keys group g's measurements in the profile database: the
// machine (the toolchain's identity, which names the host CPU), the
// threads, and each variant's steps (a library's version, how this
// tofuc calls it and the call without its buffers; a kernel's name,
// which hashes its code).
func profileKey(p *plan.Plan, g int, tools *toolchain.Tools, threads int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nthreads %d\n", tools.Identity(), threads)
	for _, steps := range p.Steps {
		for _, s := range steps {
			if s.Place == nil || s.Place.Group != g {
				continue
			}
			switch {
			case s.Op == plan.Library:
				lib, _ := hostlib.Open(s.LibraryCall().Library())
				b, _ := json.Marshal(callWithoutBuffers(&s))
				fmt.Fprintf(h, "%v %s calls %d %s\n", s.Place.Variants, libVersion(lib), hostlib.CallsRevision, b)
			case s.Op == plan.Launch:
				fmt.Fprintf(h, "%v %s\n", s.Place.Variants, p.Kernels[s.Kernel].Name)
			}
		}
	}
	return "profile-" + hex.EncodeToString(h.Sum(nil))
}

// callWithoutBuffers is library step s's call with its buffer ids
// zeroed: what it computes, wherever the plan put its operands.
func callWithoutBuffers(s *plan.Step) any {
	if c := s.GEMM; c != nil {
		g := *c
		g.A.Buffer, g.B.Buffer, g.C.Buffer = 0, 0, 0
		return g
	}
	c := *s.Conv
	c.X.Buffer, c.W.Buffer, c.Y.Buffer = 0, 0, 0
	if c.Post != nil && c.Post.Bias != nil {
		post := *c.Post
		post.Bias = &plan.Dense{Offset: c.Post.Bias.Offset}
		c.Post = &post
	}
	return c
}

func libVersion(l *hostlib.Library) string {
	if l == nil {
		return "missing"
	}
	return l.Version
}

func lookupProfile(tools *toolchain.Tools, key string) (map[string]float64, bool) {
	if tools.Cache == nil {
		return nil, false
	}
	b, found, err := tools.Cache.Get(key)
	var t map[string]float64
	if !found || err != nil || json.Unmarshal(b, &t) != nil {
		return nil, false
	}
	return t, true
}

func storeProfile(tools *toolchain.Tools, key string, t map[string]float64) {
	if tools.Cache == nil {
		return
	}
	if b, err := json.Marshal(t); err == nil {
		tools.Cache.Put(key, b) // a cache that cannot be written is skipped
	}
}

// PlacementRow is a placement group in the report's placement section.
type PlacementRow struct {
	Label  string             `json:"label"`
	Pos    string             `json:"pos,omitempty"`
	Chosen string             `json:"chosen"`
	Millis map[string]float64 `json:"millis"`
}

// PlacementData is the placement section's data in report.json.
type PlacementData struct {
	Threads int `json:"threads"`
	// PlanMillis is the whole plan's time with each library, mixed
	// (where timed) and with the generated kernels alone, of which the
	// least was chosen (a library's plan by libraryMargin).
	PlanMillis map[string]float64 `json:"plan_millis"`
	Groups     []PlacementRow     `json:"groups"`
	Cost       placementCost      `json:"cost"`
}

// placementSection is the report's section on p's placement: the whole
// plan's time with each library, then per group every candidate's
// measured time and the one chosen.
func placementSection(p *plan.Plan, threads int, walls map[string]float64, cost placementCost) report.Section {
	all := candidates(p)
	data := PlacementData{Threads: threads, PlanMillis: walls, Cost: cost}
	line := "the whole plan:"
	for _, c := range planChoices(p) {
		line += fmt.Sprintf(" %s %.3f ms,", c, walls[c])
	}
	lines := []string{fmt.Sprintf("%d parts of the plan placed by measured time on this host (%d threads)", len(p.Placement), threads),
		strings.TrimSuffix(line, ","), cost.String(len(p.Placement)), "per part, in ms:"}
	head := fmt.Sprintf("%-10s", "chosen")
	for _, c := range all {
		head += fmt.Sprintf(" %10s", c)
	}
	lines = append(lines, head+"  computes")
	for _, pg := range p.Placement {
		data.Groups = append(data.Groups, PlacementRow{Label: pg.Label, Pos: pg.Pos, Chosen: pg.Chosen, Millis: pg.Millis})
		line := fmt.Sprintf("%-10s", pg.Chosen)
		for _, c := range all {
			if ms, ok := pg.Millis[c]; ok {
				line += fmt.Sprintf(" %10.3f", ms)
			} else {
				line += fmt.Sprintf(" %10s", "-")
			}
		}
		lines = append(lines, line+"  "+pg.Label)
	}
	return report.Section{Name: "placement", Title: "Placement", Lines: lines, Data: data}
}
