package algorithms

// The debts of charges in a window algorithm: a count c may exceed L by the
// debt e ≤ D that charges recorded, and each later window pays off L of it.

// excess returns max(0, c − L).
func excess(c, L uint64) uint64 {
	if c > L {
		return c - L
	}
	return 0
}

// paidDown returns max(0, d − k·L): a debt d after k windows of L. It forms
// k·L only when that is below d, and L > 0 whenever d > 0.
func paidDown(d, k, L uint64) uint64 {
	if d == 0 || k >= ceilDiv(d, L) {
		return 0
	}
	return d - k*L
}

// windowsOwed returns ⌈e/L⌉, the windows after the current one that a debt e
// reaches; 0 without a debt.
func windowsOwed(e, L uint64) int64 {
	if e == 0 {
		return 0
	}
	return int64(ceilDiv(e, L))
}

// charged records a charge of n hits of limit l on a count c that owes e:
// up to L + D hits in all, the part of them above L owed. It returns the new
// count and debt.
func charged(c, e, n uint64, l Limit) (uint64, uint64) {
	L := l.Requests
	most := L + l.MaxDebt()
	if c >= most {
		return c, e
	}
	after := c + min(n, most-c)
	return after, e + excess(after, max(c, L))
}

// windowDebt is Limit.MaxDebt of the algorithms whose debt later windows pay
// off at L each: min(MaxRequests, L·⌊MaxWindow/W⌋), with W the longest of a
// calendar limit's windows, so that every debt is paid off within MaxWindow;
// 0 for a limit of 0, which pays nothing off.
func windowDebt(l Limit) uint64 {
	if l.Window <= 0 || l.Requests == 0 {
		return 0
	}
	longest := l.Window
	if l.Calendar {
		longest = l.windows().longest()
	}
	windows := uint64(MaxWindow / longest)
	if windows >= ceilDiv(MaxRequests, l.Requests) {
		return MaxRequests
	}
	return l.Requests * windows
}
