package rls

import (
	"context"
	"fmt"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRequestSizeBeyondTheBoundsIsRefused: a request with more descriptors
// than Bounds.MaxDescriptors, or a descriptor with more entries than
// Bounds.MaxEntries, is refused with InvalidArgument naming the setting and
// the numbers, and counts nothing; up to the bounds, requests are decided.
func TestRequestSizeBeyondTheBoundsIsRefused(t *testing.T) {
	many := func(n int, d func(i int) *ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor {
		ds := make([]*ratelimitv3.RateLimitDescriptor, n)
		for i := range ds {
			ds[i] = d(i)
		}
		return ds
	}
	entries := func(n int) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := range n {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: fmt.Sprint("k", i), Value: "v"})
		}
		return d
	}
	fixed := func(i int) *ratelimitv3.RateLimitDescriptor { return desc("fixed", fmt.Sprint("a", i)) }

	t.Run("the tests' bounds", func(t *testing.T) {
		f := newFixture(t, nil)
		b := f.svc.opts.Bounds
		resp := f.call(t, request(many(b.MaxDescriptors, fixed)...))
		assert.Equal(t, ok, resp.GetOverallCode())
		resp = f.call(t, request(desc("fixed", "b"), entries(b.MaxEntries)))
		assert.Equal(t, []any{ok, ok}, []any{resp.GetStatuses()[0].GetCode(), resp.GetStatuses()[1].GetCode()})

		for _, tc := range []struct {
			name string
			ds   []*ratelimitv3.RateLimitDescriptor
			msg  string
		}{
			{"257 descriptors", append(many(b.MaxDescriptors, fixed), desc("fixed", "c")),
				"rls: the request has 257 descriptors, more than the 256 one request may have (RLS_MAX_DESCRIPTORS): send them in several requests"},
			{"a descriptor of 65 entries", []*ratelimitv3.RateLimitDescriptor{desc("fixed", "c"), entries(b.MaxEntries + 1)},
				"rls: descriptors[1] has 65 entries, more than the 64 one descriptor may have (RLS_MAX_ENTRIES): send fewer; no configured rule matches more than 64"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := f.svc.ShouldRateLimit(context.Background(), request(tc.ds...))
				require.Error(t, err)
				assert.Equal(t, codes.InvalidArgument, status.Code(err))
				assert.Equal(t, tc.msg, status.Convert(err).Message())
			})
		}
		// The refused requests counted nothing: "c" still has its 3.
		resp = f.call(t, request(desc("fixed", "c")))
		assert.EqualValues(t, 2, resp.GetStatuses()[0].GetLimitRemaining())
	})

	t.Run("settings", func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.Bounds.MaxDescriptors, o.Bounds.MaxEntries = 3, 2 })
		f.call(t, request(many(3, fixed)...))
		_, err := f.svc.ShouldRateLimit(context.Background(), request(many(4, fixed)...))
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
		assert.Contains(t, status.Convert(err).Message(), "the request has 4 descriptors, more than the 3 one request may have (RLS_MAX_DESCRIPTORS)")
		f.call(t, request(entries(2)))
		_, err = f.svc.ShouldRateLimit(context.Background(), request(entries(3)))
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
		assert.Contains(t, status.Convert(err).Message(), "descriptors[0] has 3 entries, more than the 2 one descriptor may have (RLS_MAX_ENTRIES)")
	})
}
