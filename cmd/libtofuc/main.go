// Command libtofuc is tofuc as a C library, libtofuc.so (go build
// -buildmode=c-shared), for the Python package (python/tofuc) and any
// other language with a C foreign-function interface. Two functions:
//
//	char *tofuc_call(const char *request, void **buffers, int64_t *sizes, int64_t n);
//	void tofuc_free(void *p);
//
// tofuc_call runs one request of package api, in JSON, whose tensors are
// the raw arrays buffers[i] of sizes[i] bytes (read during the call
// only), and returns {"reply": REPLY, "data": [[ADDRESS, BYTES], ...]}:
// the reply, and each tensor it describes as a raw array the library
// allocated. The caller frees the string and each array with tofuc_free.
package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"encoding/json"
	"unsafe"

	"tofuc/api"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

var session = api.NewSession()

//export tofuc_call
func tofuc_call(request *C.char, buffers *unsafe.Pointer, sizes *C.int64_t, n C.int64_t) *C.char {
	in := make([][]byte, int(n))
	if n > 0 {
		ptrs := unsafe.Slice(buffers, int(n))
		lens := unsafe.Slice(sizes, int(n))
		for i := range in {
			if lens[i] > 0 {
				in[i] = unsafe.Slice((*byte)(ptrs[i]), int(lens[i]))
			}
		}
	}
	reply, tensors := session.Handle([]byte(C.GoString(request)), in)
	data, err := place(tensors)
	if err != nil {
		reply, _ = json.Marshal(api.Reply{Error: err.Error()})
	}
	out := struct {
		Reply json.RawMessage `json:"reply"`
		Data  [][2]uint64     `json:"data"`
	}{Reply: reply, Data: data}
	b, _ := json.Marshal(out) // a RawMessage and numbers
	return C.CString(string(b))
}

// place copies each tensor's raw array into memory the caller frees
// (never a null pointer, even for no bytes): all of them, or none.
func place(tensors []*tensor.Tensor) ([][2]uint64, error) {
	data := [][2]uint64{}
	var placed []unsafe.Pointer
	for _, t := range tensors {
		n := npy.RawBytes(t)
		p := C.malloc(C.size_t(max(n, 1)))
		placed = append(placed, p)
		data = append(data, [2]uint64{uint64(uintptr(p)), uint64(n)})
		if err := npy.EncodeRaw(unsafe.Slice((*byte)(p), n), t); err != nil {
			for _, p := range placed {
				C.free(p)
			}
			return [][2]uint64{}, err
		}
	}
	return data, nil
}

//export tofuc_free
func tofuc_free(p unsafe.Pointer) { C.free(p) }

func main() {}
