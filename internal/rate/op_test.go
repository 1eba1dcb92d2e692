package rate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// TestOpKinds: the zero Kind takes; each kind has its name, and only a
// refund or a settlement loosens; a lease's take is a Take with a hold of
// a microsecond or more.
func TestOpKinds(t *testing.T) {
	assert.Equal(t, rate.Take, rate.Op{}.Kind)
	for _, tc := range []struct {
		kind    rate.Kind
		name    string
		loosens bool
	}{
		{rate.Take, "take", false},
		{rate.Charge, "charge", false},
		{rate.Refund, "refund", true},
		{rate.Settle, "settle", true},
	} {
		op := rate.Op{Kind: tc.kind, Hits: 1, Hold: time.Second}
		assert.Equal(t, tc.name, tc.kind.String())
		assert.True(t, tc.kind.Valid(), tc.name)
		assert.Equal(t, tc.loosens, op.Loosens(), tc.name)
		assert.Equal(t, tc.kind == rate.Take, op.Leasing(), "%s with a hold", tc.name)
	}
	assert.Equal(t, "Kind(4)", rate.Kind(4).String())
	assert.False(t, rate.Kind(4).Valid())
	assert.False(t, (&rate.Op{Hits: 1, Hold: 999 * time.Nanosecond}).Leasing(), "a hold below a microsecond is none")
}

// TestOpValidate: an op is valid with a valid limit, a valid kind, and, for
// a settlement, leases to settle; the limit's error is Limit.Validate's.
func TestOpValidate(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second}
	ls := []algorithms.Lease{{Size: 1, Close: true}}
	for _, op := range []rate.Op{
		{Limit: l, Hits: 1},
		{Limit: l, Kind: rate.Charge, Hits: 100, Debt: true},
		{Limit: l, Kind: rate.Refund, Hits: 1},
		{Limit: l, Kind: rate.Settle, Leases: ls},
	} {
		assert.NoError(t, op.Validate(), "%s", op.Kind)
	}
	bad := rate.Op{Limit: algorithms.Limit{Requests: 1, Window: time.Second}, Hits: 1}
	assert.ErrorIs(t, bad.Validate(), algorithms.ErrInvalidLimit)
	assert.EqualError(t, (&rate.Op{Limit: l, Kind: 9}).Validate(), "rate: unknown op kind Kind(9)")
	assert.EqualError(t, (&rate.Op{Limit: l, Kind: rate.Settle}).Validate(), "rate: a settlement of no leases")
}
