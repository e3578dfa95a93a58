package executor

import (
	"fmt"
	"unsafe"

	"tofuc/lang"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// CheckHostMemory refuses a plan whose run needs more of this machine's
// memory than it has available (native.AvailableMemory), before anything
// is allocated: the Go runtime cannot recover from running out of
// memory. A run holds the arenas of the devices in host memory (of devs;
// none before they are opened), each input, parameter and output
// twice: as a tensor (tensor.ElementBytes an element) and encoded in its
// dtype on its way to or from a device, and the strided copies its copy
// steps are made of (BoxRows: a box of many short dimensions makes one
// for each of their indices).
func CheckHostMemory(p *plan.Plan, devs []Device) error {
	avail, ok := native.AvailableMemory()
	if !ok {
		return nil
	}
	var arenas, tensors int64
	for d, dev := range devs {
		if _, host := dev.(HostDevice); host {
			arenas = sat(arenas, p.ArenaBytes[d])
		}
	}
	for _, bs := range [][]plan.Binding{p.Inputs, p.Params, p.Outputs} {
		for _, b := range bs {
			n := int64(1)
			for _, d := range b.Shape {
				n = satMul(n, d)
			}
			tensors = sat(tensors, satMul(n, tensor.ElementBytes+int64(lang.ParseDType(b.DType).Size())))
		}
	}
	copies := satMul(copyRows(p), int64(unsafe.Sizeof(Rows{})))
	if need := sat(sat(arenas, tensors), copies); need > avail {
		return fmt.Errorf("running this plan needs about %s of this machine's memory (%s of arenas on it, %s for its inputs, parameters and outputs, %s for its copies' strided rows), more than the %s available: run it where there is more, or compile it for smaller sizes",
			lang.FormatBytes(need), lang.FormatBytes(arenas), lang.FormatBytes(tensors), lang.FormatBytes(copies), lang.FormatBytes(avail))
	}
	return nil
}

// copyRows counts the strided copies of a plan's copy steps (saturating).
func copyRows(p *plan.Plan) int64 {
	var n int64
	for _, lists := range [][][]plan.Step{p.Init, p.Steps} {
		for _, steps := range lists {
			for _, s := range steps {
				if s.Op == plan.Copy {
					from, to := p.Buffers[s.From], p.Buffers[s.To]
					n = sat(n, boxRows(int64(elementSize(from.DType)), from.Shape, s.Src, to.Shape, s.At))
				}
			}
		}
	}
	return n
}

// sat and satMul add and multiply non-negative sizes, saturating.
func sat(a, b int64) int64 {
	if s, ok := lang.AddInt64(a, b); ok {
		return s
	}
	return 1<<63 - 1
}

func satMul(a, b int64) int64 {
	if s, ok := lang.MulInt64(a, b); ok {
		return s
	}
	return 1<<63 - 1
}
