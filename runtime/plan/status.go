package plan

import (
	"fmt"
	"math"
)

// StatusWords is the length of a launch's status: 0 or the failing site
// plus one, the dimension, the index (docs/plan.md).
const StatusWords = 3

// StatusF16Overflow in a launch's first status word says that a factor
// of its contraction, whose f32 bits are the third word, lies beyond
// f16's range, in a plan compiled in the f16 mode (docs/precision.md).
const StatusF16Overflow = 1 << 62

// StatusError is the error a launch of k recorded in its status words,
// an index out of range worded as the interpreter words it; nil when
// the first word is 0.
func (k *Kernel) StatusError(status []uint64) error {
	if status[0] == 0 {
		return nil
	}
	if status[0] == StatusF16Overflow {
		return fmt.Errorf("kernel %s: a factor of its contraction is %g, beyond f16's range (±65504), so its f16 products would be infinite; compile with --precision bf16, tf32 or f32, or scale the model's values into f16's range (in training, a smaller --loss-scale)",
			k.Label, math.Float32frombits(uint32(status[2])))
	}
	site := int(status[0]) - 1
	if site < 0 || site >= len(k.Sites) {
		return fmt.Errorf("kernel %s reported an unknown error %d", k.Label, status[0])
	}
	st, dim, idx := k.Sites[site], int(status[1]), int64(status[2])
	if dim < 0 || dim >= len(st.Shape) {
		return fmt.Errorf("%s: index %d out of range in tensor %s (shape %v)", st.Pos, idx, st.Tensor, st.Shape)
	}
	return fmt.Errorf("%s: index %d out of range [0, %d) in dimension %d of tensor %s (shape %v)", st.Pos, idx, st.Shape[dim], dim, st.Tensor, st.Shape)
}
