package codegen

import (
	"slices"
	"sort"

	"tofuc/codegen/emit"
)

// alignment of every buffer in an arena, in bytes.
const alignment = emit.CacheLine

// allocate places every buffer in its device's arena: buffers whose
// lifetimes overlap get disjoint bytes, greedily at the lowest offset that
// fits, longest-lived first; views take their base's offset plus theirs.
func (b *builder) allocate() {
	for d := range b.p.Devices {
		var ids []int
		for id, buf := range b.p.Buffers {
			if _, isView := b.views[id]; !isView && buf.Device == d {
				ids = append(ids, id)
			}
		}
		sort.SliceStable(ids, func(i, j int) bool {
			li, lj := b.life[ids[i]], b.life[ids[j]]
			if li.always != lj.always {
				return li.always
			}
			if li.first != lj.first {
				return li.first < lj.first
			}
			return b.p.Buffers[ids[i]].Bytes > b.p.Buffers[ids[j]].Bytes
		})
		var placed []int
		for _, id := range ids {
			off := b.lowestFit(id, placed)
			b.p.Buffers[id].Offset = off
			placed = append(placed, id)
			b.p.ArenaBytes[d] = max(b.p.ArenaBytes[d], off+b.p.Buffers[id].Bytes)
		}
		b.waitForReaders(placed)
	}
	for id := range b.p.Buffers {
		if _, ok := b.views[id]; ok {
			b.p.Buffers[id].Offset, b.p.Buffers[id].ViewOf = b.viewOffset(id)
		}
	}
}

// lowestFit is the lowest aligned offset where buffer id overlaps no
// placed buffer that is live at the same time.
func (b *builder) lowestFit(id int, placed []int) int64 {
	size := b.p.Buffers[id].Bytes
	var busy [][2]int64
	for _, o := range placed {
		if b.overlap(id, o) {
			buf := b.p.Buffers[o]
			busy = append(busy, [2]int64{buf.Offset, buf.Offset + buf.Bytes})
		}
	}
	sort.Slice(busy, func(i, j int) bool { return busy[i][0] < busy[j][0] })
	off := int64(0)
	for _, r := range busy {
		if off+size <= r[0] {
			break
		}
		off = max(off, (r[1]+alignment-1)/alignment*alignment)
	}
	return off
}

// overlap reports whether two buffers are live at the same time.
func (b *builder) overlap(x, y int) bool {
	lx, ly := b.life[x], b.life[y]
	if lx.always || ly.always {
		return true
	}
	if lx.first < 0 || ly.first < 0 {
		return false // never used
	}
	return lx.first <= ly.last && ly.first <= lx.last
}

// viewOffset resolves a view to its offset and its base buffer.
func (b *builder) viewOffset(id int) (int64, int) {
	v := b.views[id]
	if _, ok := b.views[v.base]; ok {
		off, _ := b.viewOffset(v.base)
		return off + v.offset, v.base
	}
	return b.p.Buffers[v.base].Offset + v.offset, v.base
}

// waitForReaders makes the first step of each buffer of a device wait
// for the other devices' reads of every buffer that held its bytes
// before it: devices run side by side, so without the wait a device
// could overwrite bytes that another still reads.
func (b *builder) waitForReaders(placed []int) {
	sh := b.shared
	if sh == nil {
		return
	}
	for _, x := range placed {
		reads := sh.remote[x]
		if len(reads) == 0 || b.life[x].always {
			continue
		}
		bx := b.p.Buffers[x]
		for _, y := range placed {
			by, first := b.p.Buffers[y], sh.first[y]
			if y == x || b.life[y].first <= b.life[x].last || by.Offset >= bx.Offset+bx.Bytes || bx.Offset >= by.Offset+by.Bytes {
				continue
			}
			if _, ok := sh.first[y]; !ok {
				continue // first used at init, or never
			}
			step := &b.p.Steps[first.Device][first.Step]
			for _, r := range reads {
				if !slices.Contains(step.After, r) {
					step.After = append(step.After, r)
				}
			}
		}
	}
}
