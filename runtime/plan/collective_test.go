package plan

import (
	"slices"
	"strings"
	"testing"
)

// allReduce is twoDevices with its reduction an all-reduce: each device
// sums y (device 0's) and z (device 1's) into a buffer of its own.
func allReduce() *Plan {
	p := twoDevices()
	p.Buffers = append(p.Buffers, Buffer{ID: 7, Name: "w@0", Device: 0, DType: "f32", Shape: []int64{4}, Bytes: 16, Role: RoleWorkspace, Offset: 320, ViewOf: -1})
	member := func(to int, after StepRef) Step {
		return Step{Op: AllReduce, Reducer: "sum", Kernel: 1, Parts: []int{1, 3}, Group: []int{0, 1}, To: to, After: []StepRef{after}, Label: "w"}
	}
	p.Steps[0] = append(p.Steps[0], member(7, StepRef{Device: 1, Step: 1}))
	p.Steps[1][2] = member(4, StepRef{Device: 0, Step: 0})
	return p
}

// TestCollectiveOrdered: the members' steps of an all-reduce come
// together in Order, in the group's order, though device 0 reaches its
// step first.
func TestCollectiveOrdered(t *testing.T) {
	p := allReduce()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	order, err := Order(p.Steps)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(order, StepRef{Device: 0, Step: 2})
	if i < 0 || i+1 >= len(order) || order[i+1] != (StepRef{Device: 1, Step: 2}) {
		t.Errorf("order %v: the all-reduce's steps (0, 2) and (1, 2) are not together", order)
	}
}

// TestValidateRefusesCollectives: malformed all-reduce steps are
// refused, naming what is wrong.
func TestValidateRefusesCollectives(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"a group of one", func(p *Plan) { p.Steps[1][2].Group = []int{1} }, "a collective needs two devices or more"},
		{"a member named twice", func(p *Plan) { p.Steps[1][2].Group = []int{1, 1} }, "part 0, buffer 1, lies on device 0, not on member 1"},
		{"this device not a member", func(p *Plan) {
			p.Steps[1][2].Group, p.Steps[1][2].Parts = []int{0, 0}, []int{1, 7}
		}, "this one (1) among them"},
		{"a member without its step", func(p *Plan) { p.Steps[0] = p.Steps[0][:2] }, "the members of group [0 1] do not all come to this collective step next"},
		{"members combining in other orders", func(p *Plan) {
			p.Steps[0][2].Parts, p.Steps[0][2].Group = []int{3, 1}, []int{1, 0}
		}, "do not all come to this collective step next"},
		{"members with other reducers", func(p *Plan) { p.Steps[0][2].Reducer = "max" }, `reducer "max", but its kernel`},
		{"a part counted twice", func(p *Plan) { p.Steps[1][2].Parts = []int{1, 1} }, "a part counted twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := allReduce()
			tc.edit(p)
			if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
