package native

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// AvailableMemory is the memory the kernel says it can give this process
// (MemAvailable in /proc/meminfo), or what is left under its cgroup's
// limit when that is less; ok is false where neither can be read.
func AvailableMemory() (int64, bool) {
	avail, ok := memInfoAvailable("/proc/meminfo")
	limit, limited := readInt("/sys/fs/cgroup/memory.max") // "max" when unlimited
	used, _ := readInt("/sys/fs/cgroup/memory.current")
	if limited && (!ok || limit-used < avail) {
		return max(0, limit-used), true
	}
	return avail, ok
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

func memInfoAvailable(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemAvailable:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}
