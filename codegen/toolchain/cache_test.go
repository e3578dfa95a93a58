package toolchain

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTrimKeepsTheRecentlyUsed: a cache over its limit loses its least
// recently used entries, down to nine tenths of the limit, and keeps
// those written or read lately (a read marks an old entry used); a
// temporary file left by a write that stopped goes too, and files that
// are not entries stay, however old (TOFUC_CACHE may name a folder that
// holds other things).
func TestTrimKeepsTheRecentlyUsed(t *testing.T) {
	c := &Cache{Dir: t.TempDir(), Limit: 10 << 10}
	old := time.Now().Add(-48 * time.Hour)
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = Key(fmt.Sprint("entry ", i))
		if err := c.Put(keys[i], make([]byte, 2<<10)); err != nil {
			t.Fatal(err)
		}
		// entry i was last used i hours after the oldest
		at := old.Add(time.Duration(i) * time.Hour)
		os.Chtimes(c.Path(keys[i]), at, at)
	}
	if _, found, err := c.Get(keys[0]); !found || err != nil {
		t.Fatalf("entry 0: found %v, %v", found, err)
	}
	stale := filepath.Join(filepath.Dir(c.Path(keys[0])), "tmp-123")
	os.WriteFile(stale, []byte(entryMagic+"cut short"), 0o644) // a write that stopped
	os.Chtimes(stale, old, old)
	foreign := []string{filepath.Join(c.Dir, "notes.txt"), filepath.Join(c.Dir, "proj", "main.go"), filepath.Join(c.Dir, "ab", "zz-not-an-entry"), filepath.Join(c.Dir, "ab", "abc.txt"), filepath.Join(c.Dir, "ab", "tmp-editor-swap")}
	for _, f := range foreign {
		os.MkdirAll(filepath.Dir(f), 0o755)
		os.WriteFile(f, make([]byte, 20<<10), 0o644)
		os.Chtimes(f, old, old)
	}
	if err := c.Trim(c.Limit); err != nil {
		t.Fatal(err)
	}
	var kept []int
	total := int64(0)
	for i, k := range keys {
		if info, err := os.Stat(c.Path(k)); err == nil {
			kept = append(kept, i)
			total += info.Size()
		}
	}
	// 2 KiB and a header each: 4 fit in 9 KiB, the read entry 0 and the
	// three used last.
	if fmt.Sprint(kept) != "[0 7 8 9]" || total > c.Limit/10*9 {
		t.Errorf("kept entries %v (%d bytes), want [0 7 8 9] within %d bytes", kept, total, c.Limit/10*9)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a temporary file a day old was kept")
	}
	for _, f := range foreign {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s, not an entry, was removed", f)
		}
	}
}

// TestPutTrimsHourly: a put trims a cache not trimmed for an hour, and
// only then.
func TestPutTrimsHourly(t *testing.T) {
	c := &Cache{Dir: t.TempDir(), Limit: 4 << 10}
	for i := range 4 {
		if err := c.Put(Key(fmt.Sprint(i)), make([]byte, 2<<10)); err != nil {
			t.Fatal(err)
		}
	}
	// The first put trimmed an empty cache; the others were within the hour.
	if n := entries(t, c); n != 4 {
		t.Fatalf("%d entries after four puts within the hour, want 4", n)
	}
	hourAgo := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(c.Dir, trimmedName), hourAgo, hourAgo)
	if err := c.Put(Key("late"), make([]byte, 2<<10)); err != nil {
		t.Fatal(err)
	}
	if n := entries(t, c); n > 1 {
		t.Errorf("%d entries of 2 KiB after a put an hour later, want at most 1 (limit 4 KiB)", n)
	}
}

func entries(t *testing.T, c *Cache) int {
	n := 0
	filepath.WalkDir(c.Dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != trimmedName {
			n++
		}
		return nil
	})
	return n
}

// TestCacheSizeFromEnvironment: TOFUC_CACHE_SIZE bounds the default
// cache (ccache's 5G included); a value that is not a size is said and
// the default bound used, so that the tools are still found.
func TestCacheSizeFromEnvironment(t *testing.T) {
	t.Setenv("TOFUC_CACHE", t.TempDir())
	t.Setenv("TOFUC_CACHE_SIZE", "3GiB")
	c, err := DefaultCache()
	if err != nil || c.Limit != 3<<30 {
		t.Fatalf("limit %v, %v; want 3 GiB", c, err)
	}
	t.Setenv("TOFUC_CACHE_SIZE", "5G")
	if c, err := DefaultCache(); err != nil || c.Limit != 5e9 {
		t.Fatalf("TOFUC_CACHE_SIZE=5G: %v, %v; want 5e9 bytes", c, err)
	}
	var said strings.Builder
	Warnings = &said
	defer func() { Warnings = nil }()
	for _, bad := range []string{"lots", "0", "0.5", "512KiB"} {
		said.Reset()
		t.Setenv("TOFUC_CACHE_SIZE", bad)
		c, err := DefaultCache()
		if err != nil || c == nil || c.Limit != 0 || !strings.Contains(said.String(), "TOFUC_CACHE_SIZE") {
			t.Errorf("TOFUC_CACHE_SIZE=%s: %v, %v, said %q", bad, c, err, said.String())
		}
	}
	t.Setenv("TOFUC_CACHE", "off")
	if c, err := DefaultCache(); c != nil || err != nil {
		t.Errorf("TOFUC_CACHE=off with a bad TOFUC_CACHE_SIZE: %v, %v", c, err)
	}
}
