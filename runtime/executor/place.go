package executor

import (
	"slices"

	"tofuc/runtime/plan"
)

// GroupChoice is a placement group's variants as timed on the devices
// that run the plan, and the one put in force.
type GroupChoice struct {
	Label string `json:"label"`
	// Millis is each variant's time: the median over runs of the sum of
	// its steps' times, in milliseconds.
	Millis map[string]float64 `json:"millis"`
	Chosen string             `json:"chosen"`
}

// placeRuns is how many times placement times each variant on devices
// with libraries of their own.
const placeRuns = 5

// Placement is what the program's first run chose on devices with
// libraries of their own (GPUs): every placement group's variants as
// timed there and the one put in force (placeOnDevices). Nil before the
// first run, on other devices, and without groups.
func (pr *Program) Placement() []GroupChoice {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.placed)
}

// placeOnDevices chooses, once, on devices with libraries of their own
// (GPUs), every placement group's variant by measurement: the library
// chooseVariants put in force against the generated kernels, each timed
// placeRuns times (alternately, so that both share the device's slow
// moments), the faster put in force. The compile could not do it: the
// GPU's libraries are where the plan runs (docs/placement.md). The
// inputs and parameters are written; pr.mu is held.
func (pr *Program) placeOnDevices() (err error) {
	if !pr.onGPUs() || pr.placeDone || pr.Unmeasured {
		return nil
	}
	pr.placeDone = true
	if !slices.ContainsFunc(pr.inForce, func(v string) bool { return v != plan.Generated }) {
		return nil // no library loaded: nothing to choose
	}
	pr.timer = nil // made again for the variants chosen (runTimed)
	libraries := slices.Clone(pr.inForce)
	defer func() {
		if err != nil {
			pr.inForce = libraries
		}
	}()
	generated := slices.Repeat([]string{plan.Generated}, len(libraries))
	times, err := pr.timeVariants([][]string{generated, libraries})
	if err != nil {
		return err
	}
	pr.placed = make([]GroupChoice, len(libraries))
	for g, lib := range libraries {
		c := GroupChoice{Label: pr.Plan.Placement[g].Label, Millis: map[string]float64{plan.Generated: statsOf(times[0][g]).Median}, Chosen: plan.Generated}
		if lib != plan.Generated {
			c.Millis[lib] = statsOf(times[1][g]).Median
			if c.Millis[lib] < c.Millis[plan.Generated] {
				c.Chosen = lib
			}
		}
		pr.inForce[g], pr.placed[g] = c.Chosen, c
	}
	return nil
}

// timeVariants times the plan with each set of variants in force
// (inForce's), placeRuns times after a warm-up, the sets in turn: per
// set, per group, each run's time in milliseconds.
func (pr *Program) timeVariants(sets [][]string) ([][][]float64, error) {
	timers := make([]*timer, len(sets))
	times := make([][][]float64, len(sets))
	for i, set := range sets {
		pr.inForce = set
		if err := pr.run(pr.steps, nil); err != nil { // a warm-up
			return nil, err
		}
		var err error
		if timers[i], err = pr.newTimer(); err != nil {
			return nil, err
		}
		times[i] = make([][]float64, len(pr.Plan.Placement))
	}
	for range placeRuns {
		for i, set := range sets {
			pr.inForce = set
			perGroup, err := pr.groupTimes(timers[i])
			if err != nil {
				return nil, err
			}
			for g, ms := range perGroup {
				times[i][g] = append(times[i][g], ms)
			}
		}
	}
	return times, nil
}

// groupTimes runs the steps once with timer t (made for the variants in
// force) and sums each placement group's steps' times, in milliseconds.
func (pr *Program) groupTimes(t *timer) ([]float64, error) {
	if err := pr.run(pr.steps, t); err != nil {
		return nil, err
	}
	out := make([]float64, len(pr.Plan.Placement))
	for ref, start := range t.start {
		s := &pr.steps.steps[ref.Device][ref.Step]
		if s.Place == nil {
			continue
		}
		ms, err := pr.devs[ref.Device].Elapsed(start, t.end[ref])
		if err != nil {
			return nil, err
		}
		out[s.Place.Group] += ms
	}
	return out, nil
}
