package plan

import (
	"cmp"
	"fmt"
	"slices"
)

// checkBindings checks the inputs, parameters and outputs.
func (p *Plan) checkBindings() error {
	for _, list := range []struct {
		name string
		b    []Binding
	}{{"input", p.Inputs}, {"parameter", p.Params}, {"output", p.Outputs}} {
		for _, b := range list.b {
			if err := p.checkBinding(b); err != nil {
				return fmt.Errorf("%s %s: %w", list.name, b.Name, err)
			}
		}
	}
	return p.checkNext()
}

// checkNext checks that Next maps parameters to outputs of their dtype
// and shape.
func (p *Plan) checkNext() error {
	byName := func(bs []Binding, name string) *Binding {
		for i := range bs {
			if bs[i].Name == name {
				return &bs[i]
			}
		}
		return nil
	}
	for param, output := range p.Next {
		pb, ob := byName(p.Params, param), byName(p.Outputs, output)
		switch {
		case pb == nil:
			return fmt.Errorf("next: %s is not a parameter", param)
		case ob == nil:
			return fmt.Errorf("next: parameter %s's next value %s is not an output", param, output)
		case pb.DType != ob.DType || fmt.Sprint(pb.Shape) != fmt.Sprint(ob.Shape):
			return fmt.Errorf("next: parameter %s (%s%v) and its next value %s (%s%v) differ", param, pb.DType, pb.Shape, output, ob.DType, ob.Shape)
		}
	}
	return nil
}

// checkBinding checks that every tile is a box of the tensor of its
// buffer's dtype and shape, the tiles on one device of distinct boxes
// (a pipeline stage's device holds a tile per micro-batch), at most
// MaxTiles of them, and that the tiles cover the tensor.
func (p *Plan) checkBinding(b Binding) error {
	if _, err := elements(b.DType, b.Shape); err != nil {
		return err
	}
	if len(b.Tiles) == 0 || len(b.Tiles) > MaxTiles {
		return fmt.Errorf("%d tiles: a binding has 1 to %d", len(b.Tiles), MaxTiles)
	}
	held := make(map[string]bool, len(b.Tiles)) // device and box
	for _, t := range b.Tiles {
		buf, err := p.buffer(t.Buffer)
		if err != nil {
			return err
		}
		key := fmt.Sprint(buf.Device, t.Box)
		if held[key] {
			return fmt.Errorf("two tiles of box %v on device %d", t.Box, buf.Device)
		}
		held[key] = true
		if buf.DType != b.DType || len(t.Box) != len(b.Shape) || len(buf.Shape) != len(b.Shape) {
			return fmt.Errorf("tile in buffer %d (%s%v) does not match %s%v", t.Buffer, buf.DType, buf.Shape, b.DType, b.Shape)
		}
		for d, r := range t.Box {
			if r.Lo < 0 || r.Hi < r.Lo || r.Hi > b.Shape[d] || r.Hi-r.Lo != buf.Shape[d] {
				return fmt.Errorf("tile box %v does not fit buffer %d of shape %v", t.Box, t.Buffer, buf.Shape)
			}
		}
	}
	return checkCover(b)
}

// checkCover checks that the distinct boxes of a binding's tiles do not
// overlap and hold as many elements as the tensor: each element is in
// one of them (replicated tiles have the same box). Comparing each pair
// costs at most MaxTiles² (checkBinding).
func checkCover(b Binding) error {
	boxes := make([][]Dim, len(b.Tiles))
	for i, t := range b.Tiles {
		boxes[i] = t.Box
	}
	slices.SortFunc(boxes, compareBoxes)
	boxes = slices.CompactFunc(boxes, func(x, y []Dim) bool { return compareBoxes(x, y) == 0 })
	var held int64
	for i, x := range boxes {
		for _, y := range boxes[:i] {
			if intersect(x, y) {
				return fmt.Errorf("tile boxes %v and %v overlap", y, x)
			}
		}
		held += volume(x) // at most MaxCells times MaxDevices
	}
	if n, _ := elements(b.DType, b.Shape); held != n {
		return fmt.Errorf("its tiles hold %d of its %d elements: some are in no tile", held, n)
	}
	return nil
}

func compareBoxes(x, y []Dim) int {
	return slices.CompareFunc(x, y, func(a, b Dim) int {
		return cmp.Or(cmp.Compare(a.Lo, b.Lo), cmp.Compare(a.Hi, b.Hi))
	})
}

// intersect reports whether two boxes of one tensor share an element.
func intersect(x, y []Dim) bool {
	for d := range x {
		if max(x[d].Lo, y[d].Lo) >= min(x[d].Hi, y[d].Hi) {
			return false
		}
	}
	return true
}

func volume(box []Dim) int64 {
	n := int64(1)
	for _, r := range box {
		n *= r.Hi - r.Lo
	}
	return n
}

// HoldsParameter reports whether buffer id of a validated plan lies in
// a view root that holds a parameter's tile and no input's: only the
// runtime writes it, when it binds parameters (the inputs it writes at
// every run).
func (p *Plan) HoldsParameter(id int) bool {
	root := func(id int) int {
		for p.Buffers[id].ViewOf >= 0 { // a validated plan's views end
			id = p.Buffers[id].ViewOf
		}
		return id
	}
	holds := func(bindings []Binding) bool {
		return slices.ContainsFunc(bindings, func(b Binding) bool {
			return slices.ContainsFunc(b.Tiles, func(t Tile) bool { return root(t.Buffer) == root(id) })
		})
	}
	return holds(p.Params) && !holds(p.Inputs)
}

// heldRoots marks the buffers holding, or whose views hold, a tile of an
// input or a parameter: the runtime writes them before the steps, which
// only read them.
func (p *Plan) heldRoots(roots []int) []bool {
	held := make([]bool, len(p.Buffers))
	for _, bs := range [][]Binding{p.Inputs, p.Params} {
		for _, b := range bs {
			for _, t := range b.Tiles {
				held[roots[t.Buffer]] = true
			}
		}
	}
	return held
}
