// Package bootstrap gives ranks started without MPI the few bytes they
// need before they can talk to each other (NCCL's unique id): rank 0
// serves them over TCP on MASTER_ADDR, at the port after MASTER_PORT
// (torchrun's store has MASTER_PORT) or at TOFUC_BOOTSTRAP_PORT, and
// every other rank fetches them there. Nothing else goes through it:
// the ranks' messages are NCCL's.
package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

// Env is a rank's place among the processes torchrun's conventions
// describe.
type Env struct {
	Rank, Size int
	// Addr is rank 0's host and port (MASTER_ADDR:MASTER_PORT).
	Addr string
}

// FromEnv reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (or
// TOFUC_BOOTSTRAP_PORT); ok is false when RANK and WORLD_SIZE are not
// set (not started as a rank).
// A rank's GPU is its rank modulo the GPUs (cuda.Driver.OpenRank), which
// is LOCAL_RANK where every machine runs as many ranks as it has GPUs.
func FromEnv() (env Env, ok bool, err error) {
	rank, size := os.Getenv("RANK"), os.Getenv("WORLD_SIZE")
	if rank == "" || size == "" {
		return Env{}, false, nil
	}
	for name, dst := range map[string]*int{"RANK": &env.Rank, "WORLD_SIZE": &env.Size} {
		v := os.Getenv(name)
		if *dst, err = strconv.Atoi(v); err != nil || *dst < 0 {
			return Env{}, true, fmt.Errorf("$%s is %q, not a rank or a count", name, v)
		}
	}
	if env.Rank >= env.Size {
		return Env{}, true, fmt.Errorf("$RANK %d of $WORLD_SIZE %d", env.Rank, env.Size)
	}
	if env.Size == 1 {
		return env, true, nil
	}
	host := os.Getenv("MASTER_ADDR")
	if host == "" {
		return Env{}, true, errors.New(`$MASTER_ADDR "" must name rank 0's host`)
	}
	port, err := bootstrapPort()
	if err != nil {
		return Env{}, true, err
	}
	env.Addr = net.JoinHostPort(host, strconv.Itoa(port))
	return env, true, nil
}

// bootstrapPort is the port rank 0 serves on: $TOFUC_BOOTSTRAP_PORT, else
// the one after $MASTER_PORT (torchrun's own store listens on
// MASTER_PORT itself, in rank 0's agent).
func bootstrapPort() (int, error) {
	if p := os.Getenv("TOFUC_BOOTSTRAP_PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return 0, fmt.Errorf("$TOFUC_BOOTSTRAP_PORT %q is not a port, 1 to 65535", p)
		}
		return n, nil
	}
	p := os.Getenv("MASTER_PORT")
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65534 {
		return 0, fmt.Errorf("$MASTER_PORT %q is not a port, 1 to 65534 (tofuc's rank 0 serves on the next)", p)
	}
	return n + 1, nil
}

// magic begins every exchange, so that a rank of another job (or
// another program) on the port is refused rather than misread.
const magic = "tofuc-bootstrap-1\n"

// maxValue bounds what rank 0 serves.
const maxValue = 1 << 16

// Share returns rank 0's value on every rank: rank 0 serves value to
// the other ranks, which fetch it, until each has it or timeout passes.
func Share(env Env, value []byte, timeout time.Duration) ([]byte, error) {
	if env.Size == 1 {
		return value, nil
	}
	deadline := time.Now().Add(timeout)
	if env.Rank == 0 {
		return value, serve(env, value, deadline)
	}
	return fetch(env, deadline)
}

// greetFor bounds one connection's greeting: a connection that says
// nothing (a port scanner, a health check) is dropped, not waited for.
const greetFor = 10 * time.Second

// serve accepts every other rank once and sends it value, each
// connection on its own goroutine.
func serve(env Env, value []byte, deadline time.Time) error {
	_, port, err := net.SplitHostPort(env.Addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return fmt.Errorf("rank 0 cannot listen on port %s (the port after $MASTER_PORT, or $TOFUC_BOOTSTRAP_PORT): %w", port, err)
	}
	defer ln.Close()
	ln.(*net.TCPListener).SetDeadline(deadline)
	type greeting struct {
		rank int
		err  error
	}
	greetings, accepted, done := make(chan greeting), make(chan error, 1), make(chan struct{})
	defer close(done)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			go func() {
				by := time.Now().Add(greetFor)
				if deadline.Before(by) {
					by = deadline
				}
				rank, err := serveOne(conn, value, by)
				select {
				case greetings <- greeting{rank, err}:
				case <-done: // served already, or failed
				}
			}()
		}
	}()
	served := map[int]bool{}
	var stray error // a connection that was no rank's
	for len(served) < env.Size-1 {
		select {
		case g := <-greetings:
			switch {
			case g.err != nil:
				stray = g.err
			case g.rank <= 0 || g.rank >= env.Size || served[g.rank]:
				return fmt.Errorf("rank 0: a process on %s says it is rank %d, of %d ranks, %d served", env.Addr, g.rank, env.Size, len(served))
			default:
				served[g.rank] = true
			}
		case err := <-accepted:
			if stray != nil {
				err = fmt.Errorf("%w; a connection was refused: %w", err, stray)
			}
			return fmt.Errorf("rank 0 served %d of the %d other ranks on %s: %w (a rank did not start?)", len(served), env.Size-1, env.Addr, err)
		}
	}
	return nil
}

// serveOne reads a rank's greeting on conn, by the deadline, and sends
// it value.
func serveOne(conn net.Conn, value []byte, deadline time.Time) (int, error) {
	defer conn.Close()
	conn.SetDeadline(deadline)
	greeting := make([]byte, len(magic)+4)
	if _, err := io.ReadFull(conn, greeting); err != nil {
		return -1, err
	}
	if string(greeting[:len(magic)]) != magic {
		return -1, errors.New("not a tofuc rank")
	}
	rank := int(binary.LittleEndian.Uint32(greeting[len(magic):]))
	msg := binary.LittleEndian.AppendUint32([]byte(magic), uint32(len(value)))
	_, err := conn.Write(append(msg, value...))
	return rank, err
}

// fetch dials rank 0 until it answers and reads its value.
func fetch(env Env, deadline time.Time) ([]byte, error) {
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		conn, err := net.DialTimeout("tcp", env.Addr, time.Until(deadline))
		if err == nil {
			return fetchFrom(conn, env.Rank, deadline)
		}
		if time.Now().Add(pause).After(deadline) {
			return nil, fmt.Errorf("rank 0 does not answer on %s ($MASTER_ADDR, the port after $MASTER_PORT or $TOFUC_BOOTSTRAP_PORT): %w", env.Addr, err)
		}
		time.Sleep(pause) // rank 0 may not listen yet
	}
}

// fetchFrom greets rank 0 on conn and reads its value.
func fetchFrom(conn net.Conn, rank int, deadline time.Time) ([]byte, error) {
	defer conn.Close()
	conn.SetDeadline(deadline)
	if _, err := conn.Write(binary.LittleEndian.AppendUint32([]byte(magic), uint32(rank))); err != nil {
		return nil, err
	}
	head := make([]byte, len(magic)+4)
	if _, err := io.ReadFull(conn, head); err != nil {
		return nil, fmt.Errorf("reading rank 0's answer: %w", err)
	}
	n := binary.LittleEndian.Uint32(head[len(magic):])
	if string(head[:len(magic)]) != magic || n > maxValue {
		return nil, fmt.Errorf("what answers on %s is not a tofuc rank 0", conn.RemoteAddr())
	}
	value := make([]byte, n)
	if _, err := io.ReadFull(conn, value); err != nil {
		return nil, fmt.Errorf("reading rank 0's answer: %w", err)
	}
	return value, nil
}
