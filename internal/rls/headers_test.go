package rls

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
)

// headerMap returns a response's headers to add, by name.
func headerMap(resp *rlsv3.RateLimitResponse) map[string]string {
	m := map[string]string{}
	for _, h := range resp.GetResponseHeadersToAdd() {
		m[h.GetKey()] = h.GetValue()
	}
	return m
}

// testHeaders are the names of the limit headers in the tests.
func testHeaders() LimitHeaders {
	return LimitHeaders{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}
}

func withLimitHeaders(o *Options) {
	h := testHeaders()
	o.LimitHeaders = &h
}

func TestLimitHeadersReportTheMostConstrainedLimit(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		f := newFixture(t, nil)
		assert.Empty(t, f.call(t, request(desc("fixed", "a"))).GetResponseHeadersToAdd())
	})

	t.Run("on an admitted request: the fewest remaining", func(t *testing.T) {
		f := newFixture(t, withLimitHeaders)
		// fixed: 3 a minute, 2 left after this call, 59.75s to the end of
		// the window; counter: 100 per 5 minutes, 99 left.
		resp := f.call(t, request(desc("counter", "a"), desc("fixed", "a"), desc("unmatched", "x"), desc("free", "f")))
		require.Equal(t, ok, resp.GetOverallCode())
		assert.Equal(t, map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "60"}, headerMap(resp))
		assert.Len(t, resp.GetResponseHeadersToAdd(), 3)
	})

	t.Run("ties go to the first", func(t *testing.T) {
		f := newFixture(t, withLimitHeaders)
		f.call(t, request(desc("log", "a"))) // log: 2 a second, 1 left after this
		resp := f.call(t, request(desc("fixed", "b"), desc("fixed", "b2"), desc("log", "c")))
		// fixed b and b2 have 2 left, log c has 1.
		assert.Equal(t, "2", headerMap(resp)["RateLimit-Limit"])
		assert.Equal(t, "1", headerMap(resp)["RateLimit-Remaining"])
		resp = f.call(t, request(desc("log", "d"), desc("fixed", "e")))
		assert.Equal(t, "2", headerMap(resp)["RateLimit-Limit"], "log d: 1 left; fixed e: 2 left")
		assert.Equal(t, "1", headerMap(resp)["RateLimit-Reset"], "log d is fully replenished within a second")
	})

	t.Run("on a denied request: the last descriptor over its limit", func(t *testing.T) {
		f := newFixture(t, withLimitHeaders)
		for range 3 {
			f.call(t, request(desc("fixed", "a")))
		}
		f.call(t, request(desc("log", "a")))
		f.call(t, request(desc("log", "a")))
		// fixed a and log a are both over; counter has 99 left.
		resp := f.call(t, request(desc("fixed", "a"), desc("log", "a"), desc("counter", "a")))
		require.Equal(t, over, resp.GetOverallCode())
		h := headerMap(resp)
		assert.Equal(t, "2", h["RateLimit-Limit"], "the log limit, 2 a second, is the last one over")
		assert.Equal(t, "0", h["RateLimit-Remaining"])
		assert.Equal(t, "1", h["RateLimit-Reset"])
		assert.Contains(t, h, "retry-after")
		assert.Len(t, resp.GetResponseHeadersToAdd(), 4)
	})

	t.Run("names of one's own", func(t *testing.T) {
		f := newFixture(t, func(o *Options) {
			o.LimitHeaders = &LimitHeaders{Limit: "X-Limit", Remaining: "X-Left", Reset: "X-Reset"}
		})
		resp := f.call(t, request(desc("fixed", "a")))
		assert.Equal(t, map[string]string{"X-Limit": "3", "X-Left": "2", "X-Reset": "60"}, headerMap(resp))
	})

	t.Run("none without a limited descriptor or a decision", func(t *testing.T) {
		f := newFixture(t, withLimitHeaders)
		assert.Empty(t, f.call(t, request(desc("free", "a"), desc("unmatched", "b"))).GetResponseHeadersToAdd())

		opts := DefaultOptions()
		opts.FailureMode, opts.LimitHeaders = FailAllow, f.svc.opts.LimitHeaders
		failing := newService(t, failingLimiter{}, f.svc.Config(), opts)
		resp, err := failing.ShouldRateLimit(context.Background(), request(desc("fixed", "a")))
		require.NoError(t, err)
		assert.Empty(t, resp.GetResponseHeadersToAdd(), "a failure-mode answer reports no limit it did not see")
	})
}

func TestLimitHeadersAddRoundsTheResetUp(t *testing.T) {
	h := testHeaders()
	for _, c := range []struct {
		secs  int64
		nanos int32
		want  string
	}{{0, 0, "0"}, {0, 1, "1"}, {59, 0, "59"}, {59, 750_000_000, "60"}} {
		resp := &rlsv3.RateLimitResponse{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 7},
			LimitRemaining:     1,
			DurationUntilReset: &durationpb.Duration{Seconds: c.secs, Nanos: c.nanos},
		}}}
		h.add(resp)
		assert.Equal(t, map[string]string{"RateLimit-Limit": "7", "RateLimit-Remaining": "1", "RateLimit-Reset": c.want},
			headerMap(resp), "%ds %dns", c.secs, c.nanos)
	}
}
