package toolchain

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"tofuc/lang/bytesize"
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
//
// A cache holds at most Limit bytes: entries are trimmed, least recently
// used first, when a put finds the cache untrimmed for an hour (Trim).
type Cache struct {
	Dir   string
	Limit int64 // bytes; 0: DefaultMaxBytes
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
// directory (tofuc/v3 in it), of at most $TOFUC_CACHE_SIZE bytes (else,
// or with a warning when that is not a size, DefaultMaxBytes); caching
// is off when TOFUC_CACHE is "off", or (with a warning) when the folder
// cannot be made.
func DefaultCache() (*Cache, error) {
	dir := os.Getenv("TOFUC_CACHE")
	if dir == "off" {
		return nil, nil
	}
	limit, err := limitFromEnv()
	if err != nil {
		// Said, not fatal: tools that cannot compile read as missing.
		Warn("%v; the cache holds at most %d MiB", err, DefaultMaxBytes>>20)
	}
	if dir == "" {
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
	return &Cache{Dir: dir, Limit: limit}, nil
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
// (ErrDamaged) says why. An entry read is marked used (its modification
// time, set again when an hour old), so that Trim keeps it.
func (c *Cache) Get(key string) (b []byte, found bool, err error) {
	if c == nil {
		return nil, false, nil
	}
	path := c.Path(key)
	if info, err := os.Stat(path); err == nil && time.Since(info.ModTime()) > time.Hour {
		now := time.Now()
		os.Chtimes(path, now, now)
	}
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
// fails). It then trims the cache when that is due (trimNow); the error
// is the write's or the trim's.
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
		return err
	}
	return c.trimNow()
}

// DefaultMaxBytes bounds a cache's size unless TOFUC_CACHE_SIZE says
// otherwise: ccache's default. A compile of ResNet-50 keeps about 120 MB
// (its parameters, kernels and plan), each llc run a few hundred KB; a
// cache without a bound filled 62 GB of a development machine in two
// days.
const DefaultMaxBytes = 5 << 30

// trimEvery is how often the cache is walked to be trimmed: a walk of
// tens of thousands of entries takes a fraction of a second.
const trimEvery = time.Hour

// trimmedName is the file, in the cache folder, whose modification time
// says when the cache was last trimmed.
const trimmedName = "trimmed"

// MinBytes is the least bound TOFUC_CACHE_SIZE may set: less would not
// hold a small model's compile (TOFUC_CACHE=off turns the cache off).
const MinBytes = 1 << 20

// limitFromEnv is the bound TOFUC_CACHE_SIZE sets (a size such as
// 10GiB, package lang/bytesize), 0 when it is not set.
func limitFromEnv() (int64, error) {
	env := os.Getenv("TOFUC_CACHE_SIZE")
	if env == "" {
		return 0, nil
	}
	n, err := bytesize.Parse(env)
	if err == nil && n < MinBytes {
		err = fmt.Errorf("%q is less than %d MiB, too small for a compile cache (TOFUC_CACHE=off turns it off)", env, MinBytes>>20)
	}
	if err != nil {
		return 0, fmt.Errorf("TOFUC_CACHE_SIZE: %w", err)
	}
	return n, nil
}

// trimNow trims the cache when it was last trimmed trimEvery ago or more
// (or never).
func (c *Cache) trimNow() error {
	marker := filepath.Join(c.Dir, trimmedName)
	if info, err := os.Stat(marker); err == nil && time.Since(info.ModTime()) < trimEvery {
		return nil
	}
	// Marked first: processes that put entries at the same time do not
	// all walk the cache.
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return err
	}
	return c.Trim(cmp.Or(c.Limit, DefaultMaxBytes))
}

// Trim removes the least recently used entries (by modification time,
// which Get sets) until the cache holds at most nine tenths of limit
// bytes, and the temporary files of writes that stopped an hour ago or
// more. Only entries are counted and removed: files in a folder named by
// their first two characters (tmp- files there) that start with an
// entry's header; whatever else the folder holds is left alone. An entry removed while
// another process reads it stays readable to it; one removed before it
// is read is computed again.
func (c *Cache) Trim(limit int64) error {
	type entry struct {
		path string
		size int64
		used time.Time
	}
	var entries []entry
	total := int64(0)
	folders, err := os.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	for _, folder := range folders {
		if !folder.IsDir() || len(folder.Name()) != 2 {
			continue
		}
		files, err := os.ReadDir(filepath.Join(c.Dir, folder.Name()))
		if err != nil {
			continue // removed by another process meanwhile
		}
		for _, f := range files {
			info, err := f.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			path := filepath.Join(c.Dir, folder.Name(), f.Name())
			tmp := strings.HasPrefix(f.Name(), "tmp-")
			if !tmp && !strings.HasPrefix(f.Name(), folder.Name()) || !isEntry(path) {
				continue
			}
			switch {
			case tmp:
				if time.Since(info.ModTime()) > time.Hour {
					os.Remove(path)
				}
			default:
				entries = append(entries, entry{path, info.Size(), info.ModTime()})
				total += info.Size()
			}
		}
	}
	if total <= limit {
		return nil
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.used.Compare(b.used) })
	for _, e := range entries {
		if total <= limit/10*9 {
			break
		}
		if os.Remove(e.path) == nil {
			total -= e.size
		}
	}
	return nil
}

// isEntry says whether the file at path starts with an entry's header.
func isEntry(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(entryMagic))
	_, err = io.ReadFull(f, head)
	return err == nil && string(head) == entryMagic
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
