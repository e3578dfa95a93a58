package plan

import "fmt"

// Order orders the steps of every device of one list (Init or Steps) so
// that each comes after the steps it waits for: round-robin over the
// devices, each as far as it can go. A step that waits, directly or
// not, for a step that waits for it, or for a later step of its own
// device, is an error: such a list would never end.
func Order(steps [][]Step) ([]StepRef, error) {
	next := make([]int, len(steps))
	var out []StepRef
	ready := func(s *Step) bool {
		for _, r := range s.After {
			if r.Step >= next[r.Device] {
				return false
			}
		}
		return true
	}
	for progress := true; progress; {
		progress = false
		for d := range steps {
			for next[d] < len(steps[d]) && ready(&steps[d][next[d]]) {
				out = append(out, StepRef{Device: d, Step: next[d]})
				next[d]++
				progress = true
			}
		}
	}
	for d := range steps {
		if next[d] < len(steps[d]) {
			return nil, fmt.Errorf("device %d, step %d (%s %s) waits for steps that wait for it, or for a later step of its own device", d, next[d], steps[d][next[d]].Op, steps[d][next[d]].Label)
		}
	}
	return out, nil
}
