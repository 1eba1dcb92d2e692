package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// TestChargedHits: charges count in hits_total and charged_hits_total, and
// in over_limit when they took the limit past it, within_limit otherwise.
func TestChargedHits(t *testing.T) {
	m := New()
	base := rls.LimitDecision{Domain: "d", Descriptor: "d.tokens", Algorithm: algorithms.FixedWindow, Window: time.Minute, Charge: true}
	within, past := base, base
	within.Hits, past.Hits, past.OverLimit = 700, 400, true
	take := base
	take.Charge, take.Hits = false, 1
	for _, d := range []rls.LimitDecision{within, past, take} {
		m.ObserveLimit(d)
	}
	got := scrape(t, m)
	for series, want := range map[string]float64{
		rule(RuleHits, "d.tokens", "", "fixed_window", "1m"):            1101,
		rule(RuleChargedHits, "d.tokens", "", "fixed_window", "1m"):     1100,
		rule(RuleWithinLimitHits, "d.tokens", "", "fixed_window", "1m"): 701,
		rule(RuleOverLimitHits, "d.tokens", "", "fixed_window", "1m"):   400,
	} {
		assert.Equal(t, want, got[series], series)
	}
}
