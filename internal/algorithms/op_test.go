package algorithms_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// TestOpKinds: the zero Kind takes; each kind has its name, and only a
// refund or a settlement loosens; a lease's take is a Take with a hold of
// a microsecond or more.
func TestOpKinds(t *testing.T) {
	assert.Equal(t, algorithms.Take, algorithms.Op{}.Kind)
	for _, tc := range []struct {
		kind    algorithms.Kind
		name    string
		loosens bool
	}{
		{algorithms.Take, "take", false},
		{algorithms.Charge, "charge", false},
		{algorithms.Refund, "refund", true},
		{algorithms.Settle, "settle", true},
	} {
		op := algorithms.Op{Kind: tc.kind, Hits: 1, Hold: time.Second}
		assert.Equal(t, tc.name, tc.kind.String())
		assert.True(t, tc.kind.Valid(), tc.name)
		assert.Equal(t, tc.loosens, op.Loosens(), tc.name)
		assert.Equal(t, tc.kind == algorithms.Take, op.Leasing(), "%s with a hold", tc.name)
	}
	assert.Equal(t, "Kind(4)", algorithms.Kind(4).String())
	assert.False(t, algorithms.Kind(4).Valid())
	assert.False(t, (&algorithms.Op{Hits: 1, Hold: 999 * time.Nanosecond}).Leasing(), "a hold below a microsecond is none")
}

// TestOpValidate: an op is valid with a valid limit, a valid kind, and, for
// a settlement, leases to settle; the limit's error is Limit.Validate's.
func TestOpValidate(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second}
	ls := []algorithms.Lease{{Size: 1, Close: true}}
	for _, op := range []algorithms.Op{
		{Limit: l, Hits: 1},
		{Limit: l, Kind: algorithms.Charge, Hits: 100, Debt: true},
		{Limit: l, Kind: algorithms.Refund, Hits: 1},
		{Limit: l, Kind: algorithms.Settle, Leases: ls},
	} {
		assert.NoError(t, op.Validate(), "%s", op.Kind)
	}
	bad := algorithms.Op{Limit: algorithms.Limit{Requests: 1, Window: time.Second}, Hits: 1}
	assert.ErrorIs(t, bad.Validate(), algorithms.ErrInvalidLimit)
	assert.EqualError(t, (&algorithms.Op{Limit: l, Kind: 9}).Validate(), "algorithms: unknown op kind Kind(9)")
	assert.EqualError(t, (&algorithms.Op{Limit: l, Kind: algorithms.Settle}).Validate(), "algorithms: a settlement of no leases")
}
