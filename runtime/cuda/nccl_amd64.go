package cuda

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// initRankABI0 is initRank's address (nccl_amd64.s).
var initRankABI0 uintptr

// initRankArgs is what initRank reads: the function, its arguments.
type initRankArgs struct {
	fn         uintptr
	comm       *uintptr
	size, rank int32
	id         UniqueID
}

// callInitRank calls ncclCommInitRank (at fn). The amd64 C ABI passes its
// 128-byte id by value on the stack, 16 words: more than purego places
// there (9), so initRank, in assembly, copies the id there and calls fn.
func callInitRank(fn uintptr, comm *uintptr, size int32, id *UniqueID, rank int32) (int32, error) {
	a := &initRankArgs{fn: fn, comm: comm, size: size, rank: rank, id: *id}
	r, _, _ := purego.SyscallN(initRankABI0, uintptr(unsafe.Pointer(a)))
	return int32(r), nil
}
