// Package api is tofuc for programs in other languages: the Python
// package (python/tofuc, docs/python.md) calls it through the C library
// that cmd/libtofuc builds.
//
// A Session holds models by handle: compiled (Compile, as tofuc compile
// does, into a folder of their own or a temporary one) or opened from a
// folder a compile or Save wrote. A model runs on tensors (Run), trains
// step by step (TrainStep: each step's updated parameters feed the next,
// as tofuc eval --train's loop), and gives, takes and saves its
// parameters.
//
// Requests and replies are JSON (Request, Reply). Tensors cross as raw
// arrays, row-major and little-endian, in the caller's memory: a request
// names each array's dtype and shape and the index of its buffer, and
// the tensors of a reply come back beside it, for the caller's side to
// place in memory it owns (npy.EncodeRaw). Nothing is shared between
// calls but the handles.
package api
