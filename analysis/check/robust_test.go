package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDamagedSources parses and checks damaged copies of every standard
// library and example file: truncated at sampled byte offsets (every offset
// of the first 32 bytes, then evenly spread ones), and with single bytes
// replaced by characters that upset the grammar. Nothing may panic or hang,
// and every failure must be a diagnostic with a file:line:col position.
//
// Checking every offset of every file would take minutes (parsing runs at
// about 3 µs a byte), so the offsets are sampled: about truncBudget
// truncations and corruptBudget corruptions over all files, in proportion
// to their sizes (a quarter with -short). TOFUC_DAMAGE_ALL=1 tries every
// offset instead (minutes; docs/testing.md records a run).
func TestDamagedSources(t *testing.T) {
	const truncBudget, corruptBudget = 1000, 700
	var paths []string
	for _, pat := range []string{"../../stdlib/*.tdl", "../../examples/*.tdl"} {
		ps, _ := filepath.Glob(pat)
		paths = append(paths, ps...)
	}
	if len(paths) == 0 {
		t.Fatal("no sources")
	}
	srcs := map[string][]byte{}
	total := 0
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs[p] = src
		total += len(src)
	}
	scale := 1
	if testing.Short() {
		scale = 4
	}
	for _, p := range paths {
		src := srcs[p]
		name := "damaged/" + filepath.Base(p)
		trunc := offsets(len(src), truncBudget*len(src)/total/scale)
		corrupt := offsets(len(src), corruptBudget*len(src)/total/scale)
		if os.Getenv("TOFUC_DAMAGE_ALL") != "" {
			trunc, corrupt = offsets(len(src), len(src)), offsets(len(src), len(src))
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			for i := 0; i < min(32, len(src)); i++ {
				damaged(t, name, src[:i], fmt.Sprintf("truncated at %d", i))
			}
			for _, at := range trunc {
				damaged(t, name, src[:at], fmt.Sprintf("truncated at %d", at))
			}
			for k, at := range corrupt {
				c := corruptions[k%len(corruptions)]
				mut := append(append(append([]byte(nil), src[:at]...), c...), src[at+1:]...)
				damaged(t, name, mut, fmt.Sprintf("byte %d replaced by %q", at, c))
			}
		})
	}
}

var corruptions = []string{"(", "]", "*", "0", " ", "@", "{", "lambda", "\"", "-", ":", ","}

// offsets spreads about n offsets over [0, size), with a deterministic
// jitter so that they do not fall on a period of the text.
func offsets(size, n int) []int {
	n = max(n, 16)
	if size == 0 {
		return nil
	}
	stride := max(1, size/n)
	var out []int
	for k := 0; k*stride < size; k++ {
		out = append(out, min(size-1, k*stride+(k*37)%stride))
	}
	return out
}

func damaged(t *testing.T, name string, src []byte, what string) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic: %v", r)
			}
		}()
		done <- checkSource(name, src)
	}()
	select {
	case err := <-done:
		if err != nil && strings.HasPrefix(err.Error(), "panic:") {
			t.Fatalf("%s (%s): %v", name, what, err)
		}
		assertDiagnostics(t, name, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s (%s): checking did not finish in 20s", name, what)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("%s (%s): checking took %v", name, what, d)
	}
}
