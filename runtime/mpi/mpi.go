package mpi

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Open MPI's constants (mpi.h of Open MPI 4).
const (
	success          = 0
	undefined        = -32766
	threadSerialized = 2
	threadMultiple   = 3
)

// status is Open MPI's MPI_Status.
type status struct {
	source, tag, err, cancelled int32
	count                       uint64
}

// library is libmpi's functions this package calls and the addresses of
// the predefined handles it uses (Open MPI's handles are pointers to
// global structures).
type library struct {
	initThread   func(argc, argv uintptr, required int32, provided *int32) int32
	finalize     func() int32
	abort        func(comm uintptr, code int32) int32
	commRank     func(comm uintptr, rank *int32) int32
	commSize     func(comm uintptr, size *int32) int32
	commDup      func(comm uintptr, out *uintptr) int32
	commSplit    func(comm uintptr, color, key int32, out *uintptr) int32
	commSetErrh  func(comm, handler uintptr) int32
	isend        func(buf unsafe.Pointer, count int32, dtype uintptr, dest, tag int32, comm uintptr, req *uintptr) int32
	irecv        func(buf unsafe.Pointer, count int32, dtype uintptr, source, tag int32, comm uintptr, req *uintptr) int32
	iallreduce   func(send, recv unsafe.Pointer, count int32, dtype, op, comm uintptr, req *uintptr) int32
	test         func(req *uintptr, flag *int32, st *status) int32
	cancel       func(req *uintptr) int32
	requestFree  func(req *uintptr) int32
	errorString  func(code int32, buf *byte, n *int32) int32
	libraryVer   func(buf *byte, n *int32) int32
	commWorld    uintptr
	byteType     uintptr
	errorsReturn uintptr
	// sums are the datatypes MPI_SUM adds, by tofuc's dtype name, and
	// opSum MPI_SUM.
	sums  map[string]uintptr
	opSum uintptr
}

// summed are the dtypes whose all-reduce MPI sums, and the Open MPI
// datatype of each.
var summed = map[string]string{"f32": "ompi_mpi_float", "f64": "ompi_mpi_double", "i32": "ompi_mpi_int32_t", "i64": "ompi_mpi_int64_t"}

// Names of the library tried in turn, unless $TOFUC_LIBMPI names one.
var libraryNames = []string{"libmpi.so.40", "libmpi.so"}

// load opens libmpi and resolves its symbols.
func load() (*library, string, error) {
	names := libraryNames
	if p := os.Getenv("TOFUC_LIBMPI"); p != "" {
		names = []string{p}
	}
	var errs []string
	for _, name := range names {
		// Open MPI's components are shared objects that need libmpi's
		// symbols: it must be loaded globally.
		runtime.LockOSThread()
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		runtime.UnlockOSThread()
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		l := &library{}
		if err := l.resolve(h); err != nil {
			return nil, "", fmt.Errorf("%s is no Open MPI 4 library: %w", name, err)
		}
		return l, name, nil
	}
	return nil, "", fmt.Errorf("no MPI library (%s); Debian's is in the package libopenmpi3", strings.Join(errs, "; "))
}

func (l *library) resolve(h uintptr) error {
	fns := []struct {
		fn   any
		name string
	}{
		{&l.initThread, "MPI_Init_thread"},
		{&l.finalize, "MPI_Finalize"}, {&l.abort, "MPI_Abort"},
		{&l.commRank, "MPI_Comm_rank"}, {&l.commSize, "MPI_Comm_size"},
		{&l.commDup, "MPI_Comm_dup"}, {&l.commSplit, "MPI_Comm_split"}, {&l.commSetErrh, "MPI_Comm_set_errhandler"},
		{&l.isend, "MPI_Isend"}, {&l.irecv, "MPI_Irecv"}, {&l.iallreduce, "MPI_Iallreduce"}, {&l.test, "MPI_Test"},
		{&l.cancel, "MPI_Cancel"}, {&l.requestFree, "MPI_Request_free"},
		{&l.errorString, "MPI_Error_string"}, {&l.libraryVer, "MPI_Get_library_version"},
	}
	for _, f := range fns {
		addr, err := purego.Dlsym(h, f.name)
		if err != nil {
			return fmt.Errorf("no %s", f.name)
		}
		purego.RegisterFunc(f.fn, addr)
	}
	for _, v := range []struct {
		addr *uintptr
		name string
	}{{&l.commWorld, "ompi_mpi_comm_world"}, {&l.byteType, "ompi_mpi_byte"}, {&l.errorsReturn, "ompi_mpi_errors_return"}, {&l.opSum, "ompi_mpi_op_sum"}} {
		addr, err := purego.Dlsym(h, v.name)
		if err != nil {
			return fmt.Errorf("no %s", v.name)
		}
		*v.addr = addr
	}
	l.sums = map[string]uintptr{}
	for dtype, name := range summed {
		addr, err := purego.Dlsym(h, name)
		if err != nil {
			return fmt.Errorf("no %s", name)
		}
		l.sums[dtype] = addr
	}
	return nil
}
