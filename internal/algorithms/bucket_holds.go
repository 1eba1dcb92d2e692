package algorithms

// holdGroups is the number of groups a token bucket keeps of the tokens that
// leases hold, each until its own end. The ends of leases of one hold h,
// rounded up to a slot of h/(holdGroups − 1), take at most holdGroups
// values after now, so such leases never share a group with a later slot,
// and their tokens are held at most a slot longer than they last: h/16 on
// average. Fewer, longer slots hold more: with two (slots of h), tokens are
// held h/2 longer on average, which is all of a burst of h's refill when
// leases take most of it, and the leases starve.
const holdGroups = 9

// holdGroup is tokens of leases, in millionths, held until a time (µs): the
// end of the last of those leases, rounded up to a slot (see holdEnd). Both
// are 0 for a group that holds nothing.
type holdGroup struct {
	held, until int64
}

// bucketHolds are the groups of leases' tokens a bucket holds: those that
// hold tokens first, in order of their ends, the empty ones after them.
// The zero value holds nothing.
type bucketHolds [holdGroups]holdGroup

// holdEnd returns when the tokens of a lease taken at t with hold h > 0 stop
// being held: its end t + h rounded up to a multiple of its slot
// g = ⌈h/(holdGroups − 1)⌉, below t + h + g ≤ t + 2h.
func holdEnd(t, h int64) int64 {
	g := (h + holdGroups - 2) / (holdGroups - 1)
	return floorDiv(t+h+g-1, g) * g
}

// total returns H, the tokens all groups hold.
func (hs *bucketHolds) total() int64 { return hs.from(0) }

// from returns the tokens the groups from the i-th on hold: those still held
// once the earlier groups have ended.
func (hs *bucketHolds) from(i int) int64 {
	var h int64
	for _, g := range hs[i:] {
		h += g.held
	}
	return h
}

// last returns when the last group ends, 0 when none holds tokens.
func (hs *bucketHolds) last() int64 {
	var u int64
	for _, g := range hs {
		u = max(u, g.until)
	}
	return u
}

// hold adds x > 0 tokens of a lease taken at t with hold h > 0: to the group
// that ends when the lease's tokens do (holdEnd), or else to an empty group,
// or else to the first group that ends later, or else (only leases of
// other holds make it come to this) to the last group, which then ends
// with them. So a group holds its tokens no shorter than any of its leases
// lasts, and its end only ever moves later.
func (hs *bucketHolds) hold(x, t, h int64) {
	u := holdEnd(t, h)
	for i := range hs {
		if g := &hs[i]; g.held > 0 && g.until == u {
			g.held += x
			return
		}
	}
	last := &hs[len(hs)-1]
	if last.held == 0 {
		*last = holdGroup{held: x, until: u}
		hs.compact()
		return
	}
	for i := range hs {
		if g := &hs[i]; g.until > u {
			g.held += x
			return
		}
	}
	last.held, last.until = last.held+x, u
}

// release holds n tokens fewer, down to 0, for a lease that ends at e, after
// now, and gives them back: from the first group that ends no sooner than
// e. The lease's tokens went to a group that ended no sooner than the lease,
// and a group's end only moves later, so the group released from ends no
// later than the one that holds the lease's tokens, and no group ends
// between e and it: from e to its end, the tokens it stops holding were
// held for the lease, which needs them no longer.
func (hs *bucketHolds) release(n uint64, e int64) {
	for i := range hs {
		g := &hs[i]
		if g.held == 0 || g.until < e {
			continue
		}
		if n >= ceilDiv(uint64(g.held), SlicesPerWindow) {
			g.held = 0
		} else {
			g.held -= int64(n * SlicesPerWindow)
		}
		hs.compact()
		return
	}
}

// end drops the groups that have ended by t.
func (hs *bucketHolds) end(t int64) {
	for i := range hs {
		if t >= hs[i].until {
			hs[i].held = 0
		}
	}
	hs.compact()
}

// cut keeps what the groups hold within c, holding less in the groups that
// end first: for a burst lowered under what leases hold.
func (hs *bucketHolds) cut(c int64) {
	over := hs.total() - c
	for i := range hs {
		d := min(max(over, 0), hs[i].held)
		hs[i].held -= d
		over -= d
	}
	hs.compact()
}

// compact empties the groups that hold nothing, and puts those that hold
// tokens first, in order of their ends.
func (hs *bucketHolds) compact() {
	for i := range hs {
		if hs[i].held <= 0 {
			hs[i] = holdGroup{}
		}
	}
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].held > 0 && (hs[j-1].held == 0 || hs[j].until < hs[j-1].until); j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}
