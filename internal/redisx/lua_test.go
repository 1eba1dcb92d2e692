package redisx

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/lua"
)

// TestLuaDivisionIsExact checks the scripts' floor and ceiling division on
// the integers they meet, up to 2^53 in magnitude, where a/b rounded to a
// double can land on the wrong side of an integer.
func TestLuaDivisionIsExact(t *testing.T) {
	client := redistest.SharedStandalone(t).Client(t)
	driver := lua.Prelude() + `
local out = {}
for k = 1, #ARGV, 2 do
  local a, b = tonumber(ARGV[k]), tonumber(ARGV[k + 1])
  out[#out + 1] = int(fdiv(a, b))
  out[#out + 1] = int(cdiv(a, b))
end
return out
`
	const limit = 1 << 53
	rng := rand.New(rand.NewPCG(11, 12))
	var pairs [][2]int64
	for range 20_000 {
		var b int64
		switch rng.IntN(4) {
		case 0:
			b = 1 + rng.Int64N(10)
		case 1:
			b = 1 + rng.Int64N(1<<32)
		case 2:
			b = []int64{3, 7, 60, 1000, 1_000_000, 86_400_000_000, 315_360_000_000_000}[rng.IntN(7)]
		default:
			b = 1 + rng.Int64N(limit/2)
		}
		// a = k·b + d, right at or next to a multiple of b.
		k := rng.Int64N((limit-2)/b + 1)
		a := k*b + rng.Int64N(3) - 1
		if a >= limit || a <= -limit {
			continue
		}
		if rng.IntN(2) == 0 {
			a = -a
		}
		pairs = append(pairs, [2]int64{a, b})
	}
	for len(pairs) > 0 {
		batch := pairs[:min(len(pairs), 2000)]
		pairs = pairs[len(batch):]
		args := make([]any, 0, 2*len(batch))
		for _, p := range batch {
			args = append(args, strconv.FormatInt(p[0], 10), strconv.FormatInt(p[1], 10))
		}
		got, err := client.Eval(context.Background(), driver, nil, args...).StringSlice()
		require.NoError(t, err)
		require.Len(t, got, 2*len(batch))
		for i, p := range batch {
			a, b := p[0], p[1]
			floor := a / b
			if a%b != 0 && a < 0 {
				floor--
			}
			ceil := a / b
			if a%b != 0 && a > 0 {
				ceil++
			}
			require.Equal(t, strconv.FormatInt(floor, 10), got[2*i], "fdiv(%d, %d)", a, b)
			require.Equal(t, strconv.FormatInt(ceil, 10), got[2*i+1], "cdiv(%d, %d)", a, b)
		}
	}
}
