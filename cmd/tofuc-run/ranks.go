package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"tofuc/runtime/bootstrap"
	"tofuc/runtime/cuda"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/executor"
	"tofuc/runtime/mpi"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/tensor"
)

// openRankDevices opens a rank's logical device on its GPU; tests
// replace it.
var openRankDevices = func(p *plan.Plan, dir string, rank, local int) ([]executor.Device, error) {
	d, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	return d.OpenRank(p, dir, rank, local)
}

// launch is how a rank was started: its place among the ranks, how rank
// 0 shares NCCL's id with them, and what carries their host messages
// (agreement, outputs).
type launch struct {
	rank, size int
	// local is the rank among those of its machine: its GPU.
	local int
	// by names the launcher, for the rank's first line.
	by      string
	shareID func(id cuda.UniqueID) (cuda.UniqueID, error)
	control func(comm *cuda.Comm) executor.Ranks
}

// runRankOnMPI runs the plan as one rank of the processes an MPI
// launcher started: NCCL's id and the host messages go over MPI. A
// failing rank exits without ending MPI, so that the launcher stops the
// others, which name it.
func runRankOnMPI(dir string, f flags, stdout, stderr io.Writer) int {
	world, err := mpi.Init(f.timeout)
	if err != nil {
		fmt.Fprintf(stderr, "tofuc-run: %v\n", err)
		return exitUser
	}
	world.ExitOnStop(stderr)
	l := launch{rank: world.Rank(), size: world.Size(), local: localRank("OMPI_COMM_WORLD_LOCAL_RANK", world.Rank()), by: world.Version,
		shareID: func(id cuda.UniqueID) (cuda.UniqueID, error) { return shareOverMPI(world, id) },
		control: func(*cuda.Comm) executor.Ranks { return world },
	}
	err = runAsRank(l, dir, f, stdout, stderr)
	if err == nil || errors.Is(err, executor.ErrRanksDiffer) {
		// Every rank fails alike when they differ: each says why
		// before the launcher stops them.
		err = errors.Join(err, world.Close())
	}
	return rankStatus(l, err, stderr)
}

// runRankOnEnv runs the plan as rank env.Rank of ranks started with
// torchrun's environment (or --nproc-per-node): rank 0 serves NCCL's id
// over TCP, and the host messages go over NCCL.
func runRankOnEnv(env bootstrap.Env, dir string, f flags, stdout, stderr io.Writer) int {
	bootstrap.ExitOnStop(env, stderr)
	l := launch{rank: env.Rank, size: env.Size, local: localRank("LOCAL_RANK", env.Rank), by: "torchrun's environment",
		shareID: func(id cuda.UniqueID) (cuda.UniqueID, error) {
			b, err := bootstrap.Share(env, id[:], f.timeout)
			if err == nil && len(b) != len(id) {
				err = fmt.Errorf("rank 0 sent a %d-byte id, NCCL's has %d", len(b), len(id))
			}
			copy(id[:], b)
			return id, err
		},
		control: func(comm *cuda.Comm) executor.Ranks { return comm.Ranks(f.timeout) },
	}
	return rankStatus(l, runAsRank(l, dir, f, stdout, stderr), stderr)
}

// localRank is the launcher's variable env, a rank's place among the
// ranks of its machine, else rank.
func localRank(env string, rank int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n >= 0 {
		return n
	}
	return rank
}

// rankStatus prints a rank's error, naming the rank, and gives its exit
// status.
func rankStatus(l launch, err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "tofuc-run: rank %d of %d: %v\n", l.rank, l.size, err)
		return exitUser
	}
	return exitOK
}

// shareOverMPI sends rank 0's id to every other rank.
func shareOverMPI(world *mpi.World, id cuda.UniqueID) (cuda.UniqueID, error) {
	if world.Rank() != 0 {
		return id, world.Recv(0, id[:])
	}
	for r := 1; r < world.Size(); r++ {
		if err := world.Send(r, id[:]); err != nil {
			return id, err
		}
	}
	return id, nil
}

// runAsRank is runPlan as rank l.rank, one a logical device on a GPU
// of its own (docs/distributed.md): the plan's messages are NCCL's, on
// the device's stream. Rank 0 writes the outputs.
func runAsRank(l launch, dir string, f flags, stdout, stderr io.Writer) error {
	if f.bench {
		return errors.New("--bench times a plan in one process: run it without a launcher")
	}
	if err := dynamic.RefuseRanks(dir); err != nil {
		return err
	}
	specs, err := planio.Specs(f.ins)
	if err != nil {
		return err
	}
	var params, inputs map[string]*tensor.Tensor
	var devs []executor.Device
	p, err := planio.Read(dir, func(p *plan.Plan) (err error) {
		if err := executor.CheckRanks(p, l.size); err != nil {
			return err
		}
		if err := executor.CheckHostMemory(p, nil); err != nil {
			return err
		}
		if params, err = planio.Params(p, dir, f.params); err != nil {
			return err
		}
		if inputs, err = planio.Inputs(p, specs, nil); err != nil {
			return err
		}
		devs, err = openRankDevices(p, dir, l.rank, l.local)
		return err
	})
	if err != nil {
		return err
	}
	prog, comm, err := loadOnNCCL(l, p, devs, f)
	if err != nil {
		return err
	}
	defer prog.Close()
	fmt.Fprintf(stderr, "rank %d of %d: device %d of %s on %s (%s)\n", l.rank, l.size, l.rank, p.Model, devs[l.rank].Name(), l.by)
	outputs, err := prog.Run(inputs, params)
	if err != nil {
		return errors.Join(err, comm.Abort())
	}
	if err := comm.Close(); err != nil {
		return err
	}
	if l.rank != 0 {
		return nil
	}
	out := outputFolder(specs, f.params, outputs)
	out.NextParams(p, params, outputs)
	return out.Write(f.out, stdout)
}

// loadOnNCCL opens the rank's NCCL communicator (rank 0 makes its id and
// shares it) and loads the plan on the rank's device.
func loadOnNCCL(l launch, p *plan.Plan, devs []executor.Device, f flags) (*executor.Program, *cuda.Comm, error) {
	dev := devs[l.rank]
	var id cuda.UniqueID
	var err error
	if l.rank == 0 {
		id, err = cuda.NewUniqueID()
	}
	if err == nil {
		id, err = l.shareID(id)
	}
	if err != nil {
		return nil, nil, errors.Join(err, dev.Close())
	}
	comm, err := cuda.OpenCommWithin(dev, id, l.rank, l.size, f.timeout)
	if err != nil {
		return nil, nil, errors.Join(err, dev.Close())
	}
	prog, err := executor.LoadRank(p, devs, l.control(comm), comm.Messages(f.timeout))
	if err != nil {
		return nil, nil, errors.Join(err, comm.Abort()) // the communicator holds its context
	}
	return prog, comm, nil
}
