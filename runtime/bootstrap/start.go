package bootstrap

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// StartLocal runs n copies of this program with args as ranks 0 to n-1
// on this machine, in torchrun's environment (rank 0 serving on a free
// loopback port), their output passed through. When one fails, the
// others still running after a moment (grace) are stopped (SIGTERM),
// and killed a moment later, rather than left waiting for it; so are
// they when this process is told to stop, or killed. It returns the
// first failure, naming its rank.
func StartLocal(n int, args []string, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	out, errOut := &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	cmds := make([]*exec.Cmd, n)
	for r := range n {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, "TOFUC_BOOTSTRAP_PORT="+port)
		cmd.Stdout, cmd.Stderr = out, errOut
		// A launcher killed outright takes its ranks with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			stop(cmds, syscall.SIGTERM)
			return fmt.Errorf("starting rank %d: %w", r, err)
		}
		cmds[r] = cmd
	}
	return wait(cmds)
}

// grace is how long the other ranks have, after one failed, to end by
// themselves (failing alike, each saying why) before they are stopped.
const grace = 2 * time.Second

// wait waits for every rank, stopping the others a moment after one
// fails, and returns the first failure.
func wait(cmds []*exec.Cmd) error {
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, len(cmds))
	for r, cmd := range cmds {
		go func() { exits <- exit{r, cmd.Wait()} }()
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	var first error
	var stopping <-chan time.Time
	stopped := 0
	for left := len(cmds); left > 0; {
		select {
		case e := <-exits:
			left--
			if e.err != nil && first == nil {
				first = fmt.Errorf("rank %d: %w", e.rank, e.err)
				stopping = time.After(grace)
			}
		case <-stopping:
			stop(cmds, syscall.SIGTERM)
			stopping = time.After(grace)
			stopped++
			if stopped > 1 { // stopped, or stuck in a driver call: no more waiting
				stop(cmds, syscall.SIGCONT)
				stop(cmds, syscall.SIGKILL)
			}
		case sig := <-signals: // passed on: no rank outlives its launcher
			if first == nil {
				first = fmt.Errorf("stopped (%v): the ranks were stopped", sig)
			}
			stop(cmds, syscall.SIGTERM)
			if stopping == nil {
				stopping = time.After(grace)
			}
		}
	}
	return first
}

// stop sends every started rank sig (one that has ended ignores it).
func stop(cmds []*exec.Cmd, sig syscall.Signal) {
	for _, cmd := range cmds {
		if cmd != nil && cmd.Process != nil {
			cmd.Process.Signal(sig) // an error: it has ended
		}
	}
}

// freePort is a loopback port nothing listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// lockedWriter serialises the ranks' writes to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ExitOnStop makes a signal to stop (SIGTERM from StartLocal or
// torchrun when another rank failed, or an interrupt) end this rank with
// status 1 after one line on stderr.
func ExitOnStop(env Env, stderr io.Writer) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-stop
		fmt.Fprintf(stderr, "rank %d of %d: stopped (%v): another rank failed, or the launcher was stopped\n", env.Rank, env.Size, sig)
		os.Exit(1)
	}()
}
