package plan

import "fmt"

// Order orders the steps of every device of one list (Init or Steps) so
// that each comes after the steps it waits for: each device, in turn, as
// far as it can go, then the devices its steps let go on. A step that
// waits, directly or not, for a step that waits for it, or for a later
// step of its own device, is an error: such a list would never end. Its
// cost grows with the steps and their `after` edges.
func Order(steps [][]Step) ([]StepRef, error) {
	base := make([]int, len(steps)+1) // base[d]: the global index of device d's first step
	for d, list := range steps {
		base[d+1] = base[d] + len(list)
	}
	waiting := make([]int, base[len(steps)])   // per step, the after edges not yet met
	waiters := make([][]StepRef, len(waiting)) // per step, the steps waiting for it
	for d, list := range steps {
		for i, s := range list {
			waiting[base[d]+i] = len(s.After)
			for _, r := range s.After {
				waiters[base[r.Device]+r.Step] = append(waiters[base[r.Device]+r.Step], StepRef{d, i})
			}
		}
	}
	next := make([]int, len(steps))
	queue := make([]int, len(steps)) // devices that may go on
	for d := range queue {
		queue[d] = d
	}
	out := make([]StepRef, 0, len(waiting))
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for next[d] < len(steps[d]) && waiting[base[d]+next[d]] == 0 {
			for _, w := range waiters[base[d]+next[d]] {
				if waiting[base[w.Device]+w.Step]--; waiting[base[w.Device]+w.Step] == 0 && w.Device != d && next[w.Device] == w.Step {
					queue = append(queue, w.Device)
				}
			}
			out = append(out, StepRef{Device: d, Step: next[d]})
			next[d]++
		}
	}
	for d := range steps {
		if next[d] < len(steps[d]) {
			s := &steps[d][next[d]]
			return nil, fmt.Errorf("device %d, step %d (%s %s) waits for steps that wait for it, or for a later step of its own device", d, next[d], s.Op, s.Label)
		}
	}
	return out, nil
}
