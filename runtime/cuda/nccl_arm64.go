package cuda

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// callInitRank calls ncclCommInitRank (at fn). The arm64 C ABI passes
// its 128-byte id, a struct over 16 bytes, as a pointer to a copy the
// caller made.
func callInitRank(fn uintptr, comm *uintptr, size int32, id *UniqueID, rank int32) (int32, error) {
	c := *id
	r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(comm)), uintptr(size), uintptr(unsafe.Pointer(&c)), uintptr(rank))
	return int32(r), nil
}
