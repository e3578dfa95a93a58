//go:build !amd64 && !arm64

package cuda

import (
	"fmt"
	"runtime"
)

// callInitRank: ncclCommInitRank takes its id by value, which tofuc
// passes in the C ABIs of amd64 and arm64 only.
func callInitRank(fn uintptr, comm *uintptr, size int32, id *UniqueID, rank int32) (int32, error) {
	return 0, fmt.Errorf("ncclCommInitRank on %s: tofuc opens NCCL communicators on amd64 and arm64", runtime.GOARCH)
}
