package lang

// RowMajor is the row-major strides of extents, in elements.
func RowMajor(extents []int64) []int64 {
	out := make([]int64, len(extents))
	stride := int64(1)
	for i := len(extents) - 1; i >= 0; i-- {
		out[i] = stride
		stride *= extents[i]
	}
	return out
}
