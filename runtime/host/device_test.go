package host

import (
	"testing"

	"tofuc/runtime/executor"
)

// TestModeOf: one device runs inline, several as streams, unless timed
// one step at a time (inline, in the order enqueued) or strict.
func TestModeOf(t *testing.T) {
	for _, c := range []struct {
		devices int
		opts    executor.Options
		want    Mode
	}{
		{1, executor.Options{}, Inline},
		{4, executor.Options{}, Streams},
		{4, executor.Options{OneAtATime: true}, Inline},
		{4, executor.Options{Strict: true, OneAtATime: true}, Strict},
		{1, executor.Options{Strict: true}, Strict},
	} {
		if got := ModeOf(c.devices, c.opts); got != c.want {
			t.Errorf("%d devices, %+v: mode %d, want %d", c.devices, c.opts, got, c.want)
		}
	}
}
