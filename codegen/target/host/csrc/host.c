// The cpu runtime's part of a plan's host shared object.
//
// Host kernels allocate their scratch (packed blocks of a contraction,
// its sums, a row's buffers) at every call and free it at the end. With
// glibc's defaults a block over the mmap threshold (128 KiB, raised to
// the largest block freed) is mapped and unmapped, and a heap whose free
// top passes twice that threshold is trimmed (a thread's arena shrunk),
// so every call touched fresh pages: about 1,400 page faults a ResNet-50
// run. Loading the kernels fixes the thresholds instead (which also
// stops glibc adjusting them): blocks up to 32 MiB come from the heap,
// and up to 256 MiB of freed heap stays in the process for the next
// call.
#include <malloc.h>

__attribute__((constructor)) static void tofuc_keep_scratch(void) {
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
}
