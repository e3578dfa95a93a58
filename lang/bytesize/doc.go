// Package bytesize reads sizes in bytes as people write them: a number
// with an optional unit, binary (KiB, MiB, GiB, TiB), decimal (KB, MB,
// GB, TB) or B, any case, a space allowed: 16GiB, 80 GB, 1.5TiB, 1000000.
// Flags (--memory) and environment variables (TOFUC_CACHE_SIZE) use it.
package bytesize
