// Package unionfind is a disjoint-set forest: the coarsening of the
// partition search and the pipeline planner's layers join groups with it.
package unionfind

// Sets is a disjoint-set forest over 0..n-1.
type Sets struct{ parent []int }

// New is n sets of one element each.
func New(n int) *Sets {
	u := &Sets{parent: make([]int, n)}
	for i := range u.parent {
		u.parent[i] = i
	}
	return u
}

// Find is the representative of x's set (its smallest member).
func (u *Sets) Find(x int) int {
	for u.parent[x] != x {
		u.parent[x] = u.parent[u.parent[x]]
		x = u.parent[x]
	}
	return x
}

// Union joins the sets of a and b.
func (u *Sets) Union(a, b int) {
	ra, rb := u.Find(a), u.Find(b)
	if ra < rb {
		u.parent[rb] = ra
	} else if rb < ra {
		u.parent[ra] = rb
	}
}

// Classes numbers the sets in order of their smallest member and lists
// their members.
func (u *Sets) Classes() (members [][]int, class []int) {
	class = make([]int, len(u.parent))
	id := map[int]int{}
	for x := range u.parent {
		r := u.Find(x)
		c, ok := id[r]
		if !ok {
			c = len(members)
			id[r] = c
			members = append(members, nil)
		}
		class[x] = c
		members[c] = append(members[c], x)
	}
	return members, class
}
