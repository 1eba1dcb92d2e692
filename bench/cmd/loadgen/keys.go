package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// The key distributions -dist names.
const (
	distUniform = "uniform"
	distZipf    = "zipf"
	distHot     = "hot"
)

// zipfS is the exponent of the zipf distribution: key i is drawn with
// probability proportional to 1/(1+i)^zipfS, so with 1 000 keys the first
// takes about a seventh of the traffic and the first ten about half.
const zipfS = 1.1

// keyPicker draws key indexes in [0, keys) from one distribution. Each worker
// has its own; a keyPicker is not safe for concurrent use.
type keyPicker interface {
	pick() int
}

// newKeyPicker returns a picker of the named distribution over keys indexes,
// drawing from r. hotShare is the fraction of draws that go to key 0 under
// the hot distribution.
func newKeyPicker(dist string, keys int, hotShare float64, r *rand.Rand) (keyPicker, error) {
	if keys < 1 {
		return nil, fmt.Errorf("loadgen: -keys %d must be at least 1", keys)
	}
	switch dist {
	case distUniform:
		return uniformPicker{r: r, n: keys}, nil
	case distZipf:
		if keys == 1 {
			return uniformPicker{r: r, n: 1}, nil
		}
		return zipfPicker{rand.NewZipf(r, zipfS, 1, uint64(keys-1))}, nil
	case distHot:
		if !(hotShare >= 0 && hotShare <= 1) {
			return nil, fmt.Errorf("loadgen: -hot-share %v is not in [0, 1]", hotShare)
		}
		return hotPicker{r: r, n: keys, share: hotShare}, nil
	}
	return nil, fmt.Errorf("loadgen: -dist %q is not uniform, zipf or hot", dist)
}

// uniformPicker draws every key with the same probability.
type uniformPicker struct {
	r *rand.Rand
	n int
}

func (p uniformPicker) pick() int { return p.r.IntN(p.n) }

// zipfPicker draws key i with probability proportional to 1/(1+i)^zipfS.
type zipfPicker struct{ z *rand.Zipf }

func (p zipfPicker) pick() int { return int(p.z.Uint64()) }

// hotPicker sends a share of the draws to key 0 and spreads the rest evenly
// over the other keys (all to key 0 when there is no other).
type hotPicker struct {
	r     *rand.Rand
	n     int
	share float64
}

func (p hotPicker) pick() int {
	if p.n == 1 || p.r.Float64() < p.share {
		return 0
	}
	return 1 + p.r.IntN(p.n-1)
}

// keySpace holds the descriptor values a run sends: live values, whose limit
// no run reaches, and exhausted values, whose limit is spent before the run
// measures anything (see limits.go). Both are prefixed with the run's id, so
// runs against the same server never share state; the live values start
// with liveValuePrefix (a limit per day), or with another prefix of
// limits.go (hotValuePrefix, bindingValuePrefix).
type keySpace struct {
	live      []string
	exhausted []string
}

// newKeySpace returns keys live values starting with prefix and, when
// withExhausted, as many exhausted ones.
func newKeySpace(prefix, runID string, keys int, withExhausted bool) keySpace {
	ks := keySpace{live: make([]string, keys)}
	for i := range ks.live {
		ks.live[i] = prefix + runID + "." + strconv.Itoa(i)
	}
	if withExhausted {
		ks.exhausted = make([]string, keys)
		for i := range ks.exhausted {
			ks.exhausted[i] = exhaustedValuePrefix + runID + "." + strconv.Itoa(i)
		}
	}
	return ks
}
