package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress shows long work on one line of a terminal: each update
// overwrites the line, done clears it. Where stderr is not a terminal (a
// file, a pipe, a test's buffer) it is nil and prints nothing, so logs
// hold only results.
type progress struct {
	w     io.Writer
	start time.Time
}

func newProgress(stderr io.Writer) *progress {
	if f, ok := stderr.(*os.File); !ok || !isTerminal(f) {
		return nil
	}
	return &progress{w: stderr, start: time.Now()}
}

// show writes the status line, with the time so far.
func (p *progress) Show(format string, args ...any) {
	if p != nil {
		fmt.Fprintf(p.w, "\r\033[K%s (%s)", fmt.Sprintf(format, args...), time.Since(p.start).Round(time.Second))
	}
}

// count shows done of total items, with the time left at the rate so far.
func (p *progress) Count(what string, done, total int) {
	if p == nil || total == 0 {
		return
	}
	left := ""
	if done > 0 && done < total {
		rate := time.Since(p.start) / time.Duration(done)
		left = fmt.Sprintf(", about %s left", (rate * time.Duration(total-done)).Round(time.Second))
	}
	p.Show("%s: %d of %d%s", what, done, total, left)
}

func (p *progress) done() {
	if p != nil {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
