// Package mpi runs a plan's ranks over MPI: one process per logical
// device, started by a launcher (Open MPI's mpirun, or `tofuc run
// --nproc-per-node`), whose copies between devices are MPI messages
// (runtime/executor.OpenRank; docs/distributed.md).
//
// It loads Open MPI's libmpi at run time through purego, as runtime/cuda
// loads the CUDA driver, so that no binary links it: Open MPI's handles
// are the addresses of its global structures (ompi_mpi_comm_world, …),
// so the binding is of Open MPI 4 (Debian's libopenmpi3), not of MPI's
// ABI in general; $TOFUC_LIBMPI names another build of it.
//
// Every wait is bounded: a message is started without blocking and
// polled until it completes or the World's Timeout passes. A rank that
// gives up pings the others on a communicator of their own, which a
// goroutine of every rank answers with the rank it waits for; following
// those answers names the rank that holds the others: one that stopped
// answering (died, or hangs), or one that waits for none (still
// working). A launcher that stops the ranks after one failed (SIGTERM)
// makes each say the same before it exits (ExitOnStop).
package mpi
