package plan

import (
	"fmt"
	"slices"
)

// Order orders the steps of every device of one list (Init or Steps) so
// that each comes after the steps it waits for: each device, in turn, as
// far as it can go, then the devices its steps let go on. A collective
// step waits, besides, until every member of its group has the same
// step next; the group's steps then come together, in the group's order,
// so that ranks running the steps in this order meet in one collective
// call. A step that waits, directly or not, for a step that waits for
// it, or for a later step of its own device, is an error: such a list
// would never end. Its cost grows with the steps, their `after` edges
// and the collectives' members.
func Order(steps [][]Step) ([]StepRef, error) {
	o := newOrdering(steps)
	queue := make([]int, len(steps)) // devices that may go on
	for d := range queue {
		queue[d] = d
	}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for o.ready(d) {
			members := []int{d}
			if s := &steps[d][o.next[d]]; s.Op == AllReduce {
				if !o.meet(s) {
					break // a member has not reached it yet: that member goes on
				}
				members = s.Group
			}
			for _, m := range members {
				queue = append(queue, o.emit(m)...)
			}
			queue = append(queue, slices.DeleteFunc(slices.Clone(members), func(m int) bool { return m == d })...)
		}
	}
	return o.out, o.stuck()
}

// ordering is Order's state: per step (by global index, base[d] + i),
// the after edges not yet met and the steps waiting for it; per device,
// its next step.
type ordering struct {
	steps   [][]Step
	base    []int
	waiting []int
	waiters [][]StepRef
	next    []int
	out     []StepRef
}

func newOrdering(steps [][]Step) *ordering {
	o := &ordering{steps: steps, base: make([]int, len(steps)+1), next: make([]int, len(steps))}
	for d, list := range steps {
		o.base[d+1] = o.base[d] + len(list)
	}
	o.waiting = make([]int, o.base[len(steps)])
	o.waiters = make([][]StepRef, len(o.waiting))
	for d, list := range steps {
		for i, s := range list {
			o.waiting[o.base[d]+i] = len(s.After)
			for _, r := range s.After {
				g := o.base[r.Device] + r.Step
				o.waiters[g] = append(o.waiters[g], StepRef{d, i})
			}
		}
	}
	return o
}

// ready reports whether device d's next step has met its after edges.
func (o *ordering) ready(d int) bool {
	return o.next[d] < len(o.steps[d]) && o.waiting[o.base[d]+o.next[d]] == 0
}

// meet reports whether every member of collective s has met its after
// edges and has the same step next.
func (o *ordering) meet(s *Step) bool {
	for _, e := range s.Group {
		if e < 0 || e >= len(o.steps) || !o.ready(e) || !sameCollective(s, &o.steps[e][o.next[e]]) {
			return false
		}
	}
	return true
}

// sameCollective reports whether b is the step of another member of a's
// collective: its group's parts, reducer and kernel.
func sameCollective(a, b *Step) bool {
	return b.Op == AllReduce && slices.Equal(a.Group, b.Group) && slices.Equal(a.Parts, b.Parts) && a.Reducer == b.Reducer && a.Kernel == b.Kernel
}

// emit appends device d's next step to the order and returns the other
// devices whose next step it lets go on.
func (o *ordering) emit(d int) []int {
	var goOn []int
	for _, w := range o.waiters[o.base[d]+o.next[d]] {
		g := o.base[w.Device] + w.Step
		if o.waiting[g]--; o.waiting[g] == 0 && w.Device != d && o.next[w.Device] == w.Step {
			goOn = append(goOn, w.Device)
		}
	}
	o.out = append(o.out, StepRef{Device: d, Step: o.next[d]})
	o.next[d]++
	return goOn
}

// stuck names the first device whose steps did not all come in order.
func (o *ordering) stuck() error {
	for d := range o.steps {
		if o.next[d] == len(o.steps[d]) {
			continue
		}
		s := &o.steps[d][o.next[d]]
		if s.Op == AllReduce && o.ready(d) {
			return fmt.Errorf("device %d, step %d (%s %s): the members of group %v do not all come to this collective step next: each member needs it, with the same group, parts, reducer and kernel, and their collectives in the same order", d, o.next[d], s.Op, s.Label, s.Group)
		}
		return fmt.Errorf("device %d, step %d (%s %s) waits for steps that wait for it, or for a later step of its own device", d, o.next[d], s.Op, s.Label)
	}
	return nil
}
