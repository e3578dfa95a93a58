// Package bytesize reads sizes in bytes as people write them: a number
// with an optional unit, binary (KiB, MiB, GiB, TiB, or Ki ... Ti),
// decimal (KB, MB, GB, TB, or K ... T, as ccache's sizes) or B, any
// case, a space allowed: 16GiB, 80 GB, 1.5TiB, 5G, 1000000.
// Flags (--memory) and environment variables (TOFUC_CACHE_SIZE) use it.
package bytesize
