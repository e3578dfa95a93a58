package toolchain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Cache keeps tool outputs on disk by key. A nil *Cache caches nothing.
type Cache struct {
	Dir string
}

// DefaultCache is the cache under $TOFUC_CACHE, else the user's cache
// directory (tofuc/v1 in it); caching is off when TOFUC_CACHE is "off".
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
		dir = filepath.Join(base, "tofuc", "v1")
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

// Do returns the cached output for key, or computes it with fn and keeps
// it. A cache that cannot be written is skipped, not an error.
func (c *Cache) Do(key string, fn func() ([]byte, error)) ([]byte, error) {
	if c == nil {
		return fn()
	}
	path := filepath.Join(c.Dir, key[:2], key)
	if b, err := os.ReadFile(path); err == nil {
		return b, nil
	}
	b, err := fn()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if f, err := os.CreateTemp(filepath.Dir(path), "tmp-"); err == nil {
			_, werr := f.Write(b)
			cerr := f.Close()
			if werr == nil && cerr == nil {
				os.Rename(f.Name(), path)
			} else {
				os.Remove(f.Name())
			}
		}
	}
	return b, nil
}
