package plan

import "fmt"

// StatusWords is the length of a launch's status: 0 or the failing site
// plus one, the dimension, the index (docs/plan.md).
const StatusWords = 3

// StatusError is the error a launch of k recorded in its status words,
// worded as the interpreter words an index out of range; nil when the
// first word is 0.
func (k *Kernel) StatusError(status []uint64) error {
	if status[0] == 0 {
		return nil
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
