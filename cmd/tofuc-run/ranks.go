package main

import (
	"errors"
	"fmt"
	"io"

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
var openRankDevices = func(p *plan.Plan, dir string, rank int) ([]executor.Device, error) {
	d, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	return d.OpenRank(p, dir, rank)
}

// runRank runs the plan as one rank of the processes an MPI launcher
// started, one a logical device on a GPU of its own (docs/distributed.md):
// the plan's messages are NCCL's, on the device's stream; the rest
// (NCCL's id, the ranks' agreement, the outputs) MPI's. Rank 0 writes the
// outputs. A failing rank exits without ending MPI, so that the launcher
// stops the others, which name it.
func runRank(dir string, f flags, stdout, stderr io.Writer) int {
	world, err := mpi.Init(f.timeout)
	if err != nil {
		fmt.Fprintf(stderr, "tofuc-run: %v\n", err)
		return exitUser
	}
	world.ExitOnStop(stderr)
	if err := runAsRank(world, dir, f, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "tofuc-run: rank %d of %d: %v\n", world.Rank(), world.Size(), err)
		if errors.Is(err, executor.ErrRanksDiffer) {
			world.Close() // every rank fails alike: each says why before the launcher stops them
		}
		return exitUser
	}
	if err := world.Close(); err != nil {
		fmt.Fprintf(stderr, "tofuc-run: %v\n", err)
		return exitUser
	}
	return exitOK
}

// runAsRank is runPlan as rank world.Rank().
func runAsRank(world *mpi.World, dir string, f flags, stdout, stderr io.Writer) error {
	if f.bench {
		return errors.New("--bench times a plan in one process: run it without mpirun")
	}
	if dynamic.Is(dir) {
		return fmt.Errorf("%s was compiled with --dynamic, whose plans do not run as ranks yet", dir)
	}
	specs, err := planio.Specs(f.ins)
	if err != nil {
		return err
	}
	var params, inputs map[string]*tensor.Tensor
	var devs []executor.Device
	p, err := planio.Read(dir, func(p *plan.Plan) (err error) {
		if err := executor.CheckRanks(p, world.Size()); err != nil {
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
		devs, err = openRankDevices(p, dir, world.Rank())
		return err
	})
	if err != nil {
		return err
	}
	prog, comm, err := loadOnNCCL(world, p, devs, f)
	if err != nil {
		return err
	}
	defer prog.Close()
	fmt.Fprintf(stderr, "rank %d of %d: device %d of %s on %s (%s)\n", world.Rank(), world.Size(), world.Rank(), p.Model, devs[world.Rank()].Name(), world.Version)
	outputs, err := prog.Run(inputs, params)
	if err != nil {
		return errors.Join(err, comm.Abort())
	}
	if err := comm.Close(); err != nil {
		return err
	}
	if world.Rank() != 0 {
		return nil
	}
	out := outputFolder(specs, f.params, outputs)
	out.NextParams(p, params, outputs)
	return out.Write(f.out, stdout)
}

// loadOnNCCL opens the rank's NCCL communicator (rank 0 makes its id and
// sends it to the others) and loads the plan on the rank's device.
func loadOnNCCL(world *mpi.World, p *plan.Plan, devs []executor.Device, f flags) (*executor.Program, *cuda.Comm, error) {
	dev := devs[world.Rank()]
	closeAll := func(err error) error {
		return errors.Join(err, dev.Close())
	}
	var id cuda.UniqueID
	if world.Rank() == 0 {
		var err error
		if id, err = cuda.NewUniqueID(); err != nil {
			return nil, nil, closeAll(err)
		}
		for r := 1; r < world.Size(); r++ {
			if err := world.Send(r, id[:]); err != nil {
				return nil, nil, closeAll(err)
			}
		}
	} else if err := world.Recv(0, id[:]); err != nil {
		return nil, nil, closeAll(err)
	}
	comm, err := cuda.OpenComm(dev, id, world.Rank(), world.Size())
	if err != nil {
		return nil, nil, closeAll(err)
	}
	prog, err := executor.LoadRank(p, devs, world, comm.Messages(f.timeout))
	if err != nil {
		// LoadRank closed the device, and with it the communicator's
		// context: the process ends, and the launcher the other ranks.
		return nil, nil, err
	}
	return prog, comm, nil
}
