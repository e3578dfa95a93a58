package toolchain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Cache keeps tool outputs on disk by key. A nil *Cache caches nothing.
//
// Every entry starts with a header holding the SHA-256 of its contents
// and its key (entryMagic, the hash in hex, a space, the key, a newline),
// checked whenever the entry is read: an entry damaged on disk
// (truncated, emptied, overwritten, or another key's copied over it) is
// removed and computed again, and Warnings is told, never used. Entries
// are written to a temporary file and renamed into place, so that
// readers see either no entry or a whole one.
type Cache struct {
	Dir string
}

// entryMagic starts every entry (the format's version).
const entryMagic = "tofuc-cache 3\n"

// Warnings, when not nil, is told of the first damaged entry found (one
// line; FlushWarnings counts the others); the command line sets it to
// standard error.
var Warnings io.Writer

var (
	warnMu sync.Mutex
	// moreDamaged counts the damaged entries found after the first.
	damagedFound, moreDamaged int
)

// warnDamaged says the first damaged entry and counts the others.
func warnDamaged(err error) {
	warnMu.Lock()
	damagedFound++
	first := damagedFound == 1
	if !first {
		moreDamaged++
	}
	warnMu.Unlock()
	if first {
		Warn("%v; computing it again", err)
	}
}

// FlushWarnings says how many more damaged entries were found since the
// first (one line, none if none) and starts counting again.
func FlushWarnings() {
	warnMu.Lock()
	n := moreDamaged
	damagedFound, moreDamaged = 0, 0
	warnMu.Unlock()
	if n > 0 {
		Warn("%d more damaged cache entries were removed and computed again", n)
	}
}

// Warn writes one line to Warnings.
func Warn(format string, args ...any) {
	warnMu.Lock()
	defer warnMu.Unlock()
	if Warnings != nil {
		fmt.Fprintf(Warnings, "tofuc: "+format+"\n", args...)
	}
}

// DefaultCache is the cache under $TOFUC_CACHE, else the user's cache
// directory (tofuc/v3 in it); caching is off when TOFUC_CACHE is "off",
// or (with a warning) when the folder cannot be made.
func DefaultCache() (*Cache, error) {
	dir := os.Getenv("TOFUC_CACHE")
	switch dir {
	case "off":
		return nil, nil
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, nil // no home: compile without a cache
		}
		dir = filepath.Join(base, "tofuc", "v3")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		Warn("the compile cache %s cannot be used (%v): compiling without it", dir, err)
		return nil, nil
	}
	return &Cache{Dir: dir}, nil
}

// Key hashes the parts that determine a tool's output.
func Key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Path is where the entry of key lies.
func (c *Cache) Path(key string) string { return filepath.Join(c.Dir, key[:2], key) }

// ErrDamaged is the error of an entry whose contents fail their check.
var ErrDamaged = errors.New("damaged")

// Get returns the contents of the entry of key; found is false when there
// is none. An entry that fails its check is removed, and the error
// (ErrDamaged) says why.
func (c *Cache) Get(key string) (b []byte, found bool, err error) {
	if c == nil {
		return nil, false, nil
	}
	path := c.Path(key)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if b, err = unseal(raw, key); err != nil {
		os.Remove(path)
		return nil, false, fmt.Errorf("the cache entry %s is %w (%w): removed", path, ErrDamaged, err)
	}
	return b, true, nil
}

// unseal checks an entry's header against its key and its contents and
// returns them.
func unseal(raw []byte, key string) ([]byte, error) {
	rest, ok := bytes.CutPrefix(raw, []byte(entryMagic))
	if !ok {
		return nil, fmt.Errorf("no header")
	}
	header, data, ok := bytes.Cut(rest, []byte("\n"))
	sum, owner, _ := bytes.Cut(header, []byte(" "))
	if !ok || len(sum) != 2*sha256.Size {
		return nil, fmt.Errorf("a header cut short")
	}
	if string(owner) != key {
		return nil, fmt.Errorf("the entry of another key")
	}
	got := sha256.Sum256(data)
	if hex.EncodeToString(got[:]) != string(sum) {
		return nil, fmt.Errorf("%d bytes whose SHA-256 is not the header's", len(data))
	}
	return data, nil
}

// Put keeps b as the entry of key: written to a temporary file beside
// it and renamed into place (the temporary file is removed when that
// fails).
func (c *Cache) Put(key string, b []byte) error {
	if c == nil {
		return nil
	}
	path := c.Path(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "tmp-")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	_, err = f.WriteString(entryMagic + hex.EncodeToString(sum[:]) + " " + key + "\n")
	if err == nil {
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Do returns the cached output for key, or computes it with fn and keeps
// it. A cache that cannot be read or written is skipped, not an error; a
// damaged entry is computed again (Warnings is told).
func (c *Cache) Do(key string, fn func() ([]byte, error)) ([]byte, error) {
	b, found, err := c.Get(key)
	if found {
		return b, nil
	}
	if errors.Is(err, ErrDamaged) {
		warnDamaged(err)
	}
	if b, err = fn(); err != nil {
		return nil, err
	}
	c.Put(key, b)
	return b, nil
}
