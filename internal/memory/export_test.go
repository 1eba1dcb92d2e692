package memory

// Len returns the number of states m holds, counting expired ones that have
// not been dropped yet. It is for the tests, which count what a Limiter
// keeps.
func (m *Limiter) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.entries)
		sh.mu.Unlock()
	}
	return n
}
