package smt

import (
	"fmt"
	"time"

	"github.com/aclements/go-z3/z3"
)

// deadline is one rule's time limit. Every phase checks it (lowering,
// proof steps, unrolling, the interpreter between nodes), and a solver
// call still running when it passes is interrupted, so that a rule ends
// within its timeout whatever it holds.
type deadline struct {
	at  time.Time
	ctx *z3.Context
}

// timedOut is what check panics with once the deadline has passed;
// Verify recovers it into an unknown verdict.
type timedOut struct{ phase string }

// notModelled is panicked where a rule turns out, during unrolling, to
// use what the encoding does not model at some shape (an infinity in
// arithmetic); the bounded check recovers it into an unknown verdict.
type notModelled struct{ what string }

func (d *deadline) check(phase string) {
	if d != nil && time.Now().After(d.at) {
		panic(timedOut{phase})
	}
}

// solve checks s, interrupting the solver at the deadline.
func (d *deadline) solve(s *z3.Solver, phase string) (bool, error) {
	d.check(phase)
	t := time.AfterFunc(time.Until(d.at), d.ctx.Interrupt)
	sat, err := s.Check()
	t.Stop()
	if err != nil {
		d.check(phase)
	}
	return sat, err
}

// recoverVerdict turns a timeout or a construct found unmodelled into an
// unknown verdict in *res; other panics (bugs) go on.
func recoverVerdict(res *Result, timeout time.Duration) {
	switch r := recover().(type) {
	case nil:
	case timedOut:
		*res = Result{Status: Unknown, Reason: fmt.Sprintf("no verdict within the timeout (%s) while %s", timeout, r.phase)}
	case notModelled:
		*res = Result{Status: Unknown, Reason: r.what}
	default:
		panic(r)
	}
}
