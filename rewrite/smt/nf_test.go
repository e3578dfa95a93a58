package smt

import "testing"

func TestLinCanonical(t *testing.T) {
	i, n := linName("i"), linName("N")
	for _, tc := range []struct {
		a, b lin
		same bool
	}{
		{i.sub(n).add(n), i, true},
		{i.add(n), n.add(i), true},
		{i.scale(2).divOp(iFloorDiv, 2), i, true},
		{i.divOp(iTruncDiv, 2), i.divOp(iFloorDiv, 2), false},
		{i.mul(n), n.mul(i), true},
		{i.add(linConst(1)), i, false},
	} {
		if got := tc.a.key() == tc.b.key(); got != tc.same {
			t.Errorf("%s vs %s: same %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

func TestCondNot(t *testing.T) {
	i := linName("i")
	lt, _ := mkGE(linConst(3).sub(i).add(linConst(-1))) // i < 3
	ge, _ := lt.not()
	want, _ := mkGE(i.sub(linConst(3))) // i >= 3
	if ge.key != want.key {
		t.Errorf("not(i < 3) = %s, want %s", ge, want)
	}
	for v := int64(0); v < 6; v++ {
		a, _ := lt.eval(map[string]int64{"i": v})
		b, _ := ge.eval(map[string]int64{"i": v})
		if a == b {
			t.Errorf("i = %d: i < 3 is %v and its negation %v", v, a, b)
		}
	}
	if _, k := mkGE(linConst(-1)); !k.known || k.val {
		t.Errorf("-1 >= 0 should fold to false")
	}
}

func TestFnLiftsGuards(t *testing.T) {
	i := linName("i")
	c, _ := mkGE(i) // i >= 0
	nc, _ := c.not()
	x := atomPoly(newAccess("x", []lin{i})).withGuard(c, condConst{})
	y := atomPoly(newAccess("y", []lin{i})).withGuard(nc, condConst{})
	p := fnPoly("exp", x.add(y))
	if len(p) != 2 {
		t.Fatalf("exp(select(i >= 0, x, y)) has %d terms, want 2: %s", len(p), p.key())
	}
	for _, tm := range p {
		if len(tm.guard) != 1 || len(tm.atoms[0].args[0]) != 1 {
			t.Errorf("term %s: want one guard and one argument term", tm)
		}
	}
}
