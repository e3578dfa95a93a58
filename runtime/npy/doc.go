// Package npy reads and writes NumPy .npy and .npz files as tensor values.
//
// Reading accepts format versions 1.0, 2.0 and 3.0, little- and big-endian
// data, C order only (a header with 'fortran_order': True is rejected), and
// the dtypes f2 (float16), f4, f8, i1, i2, i4, i8, u1, u2, u4, u8 and b1
// (bool). Writing produces version 1.0 (2.0 when the header would not fit),
// little-endian, with the header padded so that the data starts at a
// multiple of 64 bytes, as NumPy does.
//
// bfloat16 is not a NumPy dtype: a bf16 tensor is written as float32 ('<f4',
// every bf16 value is exactly representable) and therefore reads back as an
// f32 tensor. Bool elements other than 0 read as true.
//
// An .npz file is a zip archive (stored or deflated members) of .npy files;
// the member "x.npy" holds the tensor named "x" (a member whose name does not
// end in ".npy" is named by its whole name). WriteNPZ stores members
// uncompressed, sorted by name, with zero timestamps, so its output depends
// only on the tensors.
//
// Malformed input is always an error, never a panic. Before allocating the
// elements, the reader checks that the declared shape fits in the bytes that
// are actually available (the file's size, the npz member's uncompressed
// size, or, for a plain io.Reader, the bytes it really delivers), so an
// absurd shape in a small file cannot cause a huge allocation. A file's
// data, and an npz member's, must be exactly what the header declares: a
// longer one is refused, not read in part. Files are read only when they
// are regular (a directory, or a named pipe that would block the reader,
// is refused at once), and an array that would take more memory than the
// machine has available (native.AvailableMemory; what the file's earlier
// arrays took counted) is refused before its data is read. The Vetted
// readers first give each header to a Vet (a runtime compares it with a
// plan's binding), so that an array nobody wants is never read. Headers
// are limited to 1 MiB.
package npy
