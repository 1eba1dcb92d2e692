package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// result is what one measured run found. Its JSON form is the line -json
// prints and the unit of the bench's results file. For an evalsha run,
// decisions are script calls.
type result struct {
	// Name labels the run in the bench; empty for a single run.
	Name string `json:"name,omitempty"`
	// Group and Backend place a bench cell in the report.
	Group   string `json:"group,omitempty"`
	Backend string `json:"backend,omitempty"`
	// Mode is "rls" for ShouldRateLimit calls, "evalsha" for script calls.
	Mode string `json:"mode"`
	// Target is the address of the server, or the Redis addresses.
	Target      string  `json:"target"`
	Domain      string  `json:"domain,omitempty"`
	Key         string  `json:"key,omitempty"`
	Script      string  `json:"script,omitempty"`
	Pipeline    int     `json:"pipeline,omitempty"`
	Keys        int     `json:"keys"`
	Dist        string  `json:"dist,omitempty"`
	Over        float64 `json:"over"`
	Concurrency int     `json:"concurrency"`
	Conns       int     `json:"conns,omitempty"`

	// Seconds is how long decisions were counted for.
	Seconds   float64 `json:"seconds"`
	Decisions uint64  `json:"decisions"`
	// Rate is Decisions / Seconds.
	Rate    float64 `json:"decisions_per_second"`
	Allowed uint64  `json:"allowed"`
	Denied  uint64  `json:"denied"`
	Errors  uint64  `json:"errors"`
	// ErrorCodes counts the errors by gRPC code (or "redis").
	ErrorCodes map[string]uint64 `json:"error_codes,omitempty"`
	FirstError string            `json:"first_error,omitempty"`

	// Latencies of answered calls, in microseconds.
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
	Mean float64 `json:"mean_us"`

	// RepeatRates are the decisions per second of every run of a bench
	// cell that ran more than once; the result is the fastest of them.
	RepeatRates []float64 `json:"repeat_rates,omitempty"`

	// CPU is the CPU time each process used during the measurement, per
	// decision, in microseconds, by name: loadgen, server, redis. Set in
	// bench cells only.
	CPU map[string]float64 `json:"cpu_us_per_decision,omitempty"`

	// Redis is set when the run read INFO commandstats.
	Redis *redisCost `json:"redis,omitempty"`

	// Leases is what the leases of ratewarden's servers did during the
	// measurement, when the run read their counters.
	Leases *leaseCounts `json:"leases,omitempty"`
}

// redisCost is what the measured decisions cost Redis.
type redisCost struct {
	// Commands is the calls of each command during the run, summed over the
	// masters, without INFO and REPLCONF.
	Commands commandStats `json:"commands"`
	// PerDecision is all of Commands divided by the decisions.
	PerDecision float64 `json:"commands_per_decision"`
	// EvalshaPerDecision is EVALSHA calls divided by the decisions.
	EvalshaPerDecision float64 `json:"evalsha_per_decision"`
}

// newRedisCost divides the calls of a run by its decisions.
func newRedisCost(calls commandStats, decisions uint64) *redisCost {
	c := &redisCost{Commands: calls}
	if decisions > 0 {
		c.PerDecision = float64(calls.total()) / float64(decisions)
		c.EvalshaPerDecision = float64(calls["evalsha"]) / float64(decisions)
	}
	return c
}

// perDecision returns the commands per decision; 0 when c is nil (a run
// that read no INFO commandstats).
func (c *redisCost) perDecision() float64 {
	if c == nil {
		return 0
	}
	return c.PerDecision
}

// quotient returns a/b, or 0 when b is 0.
func quotient(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// setLatencies fills in the latency fields from h.
func (r *result) setLatencies(h *Histogram) {
	r.P50 = micros(h.Quantile(0.50))
	r.P99 = micros(h.Quantile(0.99))
	r.P999 = micros(h.Quantile(0.999))
	r.Max = micros(h.Max())
	r.Mean = micros(h.Mean())
}

// micros returns d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// writeJSON writes r as one line of JSON.
func (r *result) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeText writes r for a person to read.
func (r *result) writeText(w io.Writer) error {
	var b strings.Builder
	switch r.Mode {
	case modeEvalsha:
		fmt.Fprintf(&b, "evalsha %s on %s: %d keys, %d callers, pipeline %d, %.2fs\n",
			r.Script, r.Target, r.Keys, r.Concurrency, r.Pipeline, r.Seconds)
		fmt.Fprintf(&b, "calls       %d (%.0f/s)\n", r.Decisions, r.Rate)
	default:
		fmt.Fprintf(&b, "%s/%s on %s: %d keys (%s), over-limit target %.0f%%, %d callers on %d connections, %.2fs\n",
			r.Domain, r.Key, r.Target, r.Keys, r.Dist, 100*r.Over, r.Concurrency, r.Conns, r.Seconds)
		fmt.Fprintf(&b, "decisions   %d (%.0f/s)\n", r.Decisions, r.Rate)
		denied := 0.0
		if r.Decisions > 0 {
			denied = 100 * float64(r.Denied) / float64(r.Decisions)
		}
		fmt.Fprintf(&b, "allowed     %d\ndenied      %d (%.1f%%)\n", r.Allowed, r.Denied, denied)
	}
	fmt.Fprintf(&b, "errors      %d", r.Errors)
	for _, code := range slices.Sorted(maps.Keys(r.ErrorCodes)) {
		fmt.Fprintf(&b, " %s=%d", code, r.ErrorCodes[code])
	}
	if r.FirstError != "" {
		fmt.Fprintf(&b, " (first: %s)", r.FirstError)
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "latency     p50 %s  p99 %s  p99.9 %s  max %s  mean %s\n",
		fmtMicros(r.P50), fmtMicros(r.P99), fmtMicros(r.P999), fmtMicros(r.Max), fmtMicros(r.Mean))
	if c := r.Redis; c != nil {
		fmt.Fprintf(&b, "redis       %.2f commands per decision, %.2f EVALSHA per decision:", c.PerDecision, c.EvalshaPerDecision)
		for _, cmd := range slices.Sorted(maps.Keys(c.Commands)) {
			fmt.Fprintf(&b, " %s=%d", cmd, c.Commands[cmd])
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtMicros formats a number of microseconds as a short duration.
func fmtMicros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.2fms", us/1e3)
	default:
		return fmt.Sprintf("%.0fµs", us)
	}
}
