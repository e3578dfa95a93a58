package stdlib_test

import (
	"tofuc/lang/ir"
)

// Interpreter cases for pad_axis, worked by hand as NumPy's pad gives
// them (ONNX's reference is np.pad), pads larger than the axis included.
func init() {
	s := func(dims ...int) []int { return dims }
	x := floats(s(2, 3), 1, 2, 3, 4, 5, 6)
	at := func(axis, before, after int64, mode string) map[string]ir.AttrValue {
		return map[string]ir.AttrValue{"axis": aInt(axis), "before": aInt(before), "after": aInt(after), "mode": aStr(mode)}
	}
	register(
		ewFixed("pad_axis", "edge", at(1, 2, 1, "edge"),
			floats(s(2, 6), 1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6), x),
		ewFixed("pad_axis", "reflect, pads past the extent reflect again", at(1, 4, 5, "reflect"),
			floats(s(2, 12), 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2, 4, 5, 6, 5, 4, 5, 6, 5, 4, 5, 6, 5), x),
		ewFixed("pad_axis", "wrap", at(1, 4, 2, "wrap"),
			floats(s(2, 9), 3, 1, 2, 3, 1, 2, 3, 1, 2, 6, 4, 5, 6, 4, 5, 6, 4, 5), x),
		ewFixed("pad_axis", "reflect of one row repeats it, axis 0", at(0, 1, 2, "reflect"),
			floats(s(4, 3), 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3), floats(s(1, 3), 1, 2, 3)),
	)
}
