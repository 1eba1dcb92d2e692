// Package rls implements Envoy's RateLimitService (envoy.service.ratelimit.v3)
// over a Limiter: it validates requests, matches their descriptors to the
// rules of the loaded configuration, asks the Limiter, and assembles the
// response. It knows nothing of Redis.
package rls

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Service answers ShouldRateLimit. It is safe for concurrent use; its
// configuration can be swapped at any time with SetConfig, and a request sees
// either the old configuration or the new one, never a mix.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	limiter  rate.Limiter
	opts     Options
	log      *slog.Logger
	cfg      atomic.Pointer[config.Config]
	observer Observer
	// now is the clock of the observed durations.
	now func() time.Time
	// nearLimitPPM is Options.NearLimitRatio in parts per million.
	nearLimitPPM uint64
}

// New returns a Service deciding with limiter under cfg, which may be nil
// until a configuration is loaded (every valid request is then answered
// ErrNoConfig). Options that are not valid (see Options) are an error
// naming the option.
func New(limiter rate.Limiter, cfg *config.Config, opts Options) (*Service, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withNops()
	s := &Service{
		limiter:      limiter,
		opts:         opts,
		log:          opts.Logger,
		observer:     opts.Observer,
		now:          time.Now,
		nearLimitPPM: uint64(math.Round(opts.NearLimitRatio * ppm)),
	}
	s.cfg.Store(cfg)
	return s, nil
}

// SetConfig replaces the configuration that later requests are matched
// against; nil means none is loaded.
func (s *Service) SetConfig(cfg *config.Config) { s.cfg.Store(cfg) }

// ErrNoConfig is ShouldRateLimit's answer to every valid request while no
// configuration is loaded: gRPC code Unknown with envoyproxy/ratelimit's
// message, the error that project answers until its first configuration.
// Envoy's rate limit filter then applies its failure mode
// (failure_mode_deny), as it would with envoyproxy/ratelimit, instead of
// taking every descriptor for unmatched and admitting the request.
var ErrNoConfig = status.Error(codes.Unknown, "no rate limit configuration loaded")

// Config returns the configuration in use, or nil when none is loaded.
func (s *Service) Config() *config.Config { return s.cfg.Load() }

// ShouldRateLimit decides whether the request's descriptors are within their
// limits. Invalid requests get codes.InvalidArgument; valid ones, while no
// configuration is loaded, ErrNoConfig; a failure of the limiter (of the
// backend, or a layer's refusal: an open circuit breaker, a request shed)
// gets the configured FailureMode.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := s.now()
	handled := time.Now()
	resp, err := s.shouldRateLimit(ctx, req, arrival(ctx, handled), handled)
	s.observeRequest(start, resp, err)
	return resp, err
}

// observeRequest tells the observer how a call that started at start
// ended.
//
//go:noinline
func (s *Service) observeRequest(start time.Time, resp *rlsv3.RateLimitResponse, err error) {
	s.observer.ObserveRequest(RequestOutcome{
		Duration: s.now().Sub(start),
		Code:     resp.GetOverallCode(),
		GRPCCode: status.Code(err),
	})
}

// shouldRateLimit answers req, which arrived at arrived and whose handler
// started at handled (on the wall clock that context deadlines use).
//
// Its frame, and those of the functions above it, stay on the stack while
// the limiter decides, under the frames of every layer and of the backend:
// what comes before the call (the plan) and after it (the answer) is done
// in functions of their own, so that their locals are not part of it. A
// request's goroutine, which gRPC starts for it, then grows its stack less
// often (see BenchmarkColdKeysRedis in internal/server).
func (s *Service) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest, arrived, handled time.Time) (*rlsv3.RateLimitResponse, error) {
	p, resp, err := s.prepare(req)
	if p == nil {
		return resp, err
	}
	caller := ctx
	ctx, cancel, reserve := s.withDeadline(ctx, arrived, handled)
	defer cancel()
	results, err := s.limiter.Do(ctx, p.ops)
	return s.answer(ctx, caller, reserve, p, results, err)
}

// prepare validates req and plans what it asks of the limiter. It returns a
// nil plan with the answer when there is nothing to ask: an error, or the
// response of a request none of whose descriptors is limited.
//
//go:noinline
func (s *Service) prepare(req *rlsv3.RateLimitRequest) (*plan, *rlsv3.RateLimitResponse, error) {
	if err := validateRequest(req, &s.opts.Bounds); err != nil {
		return nil, nil, err
	}
	cfg := s.cfg.Load()
	if cfg == nil {
		return nil, nil, ErrNoConfig
	}
	p, err := newPlan(cfg, req, s.opts)
	if err != nil {
		return nil, nil, err
	}
	if len(p.ops) == 0 {
		return nil, p.response(nil), nil
	}
	return p, nil, nil
}

// answer answers the request of p from the limiter's results and err, got
// within ctx; caller is the caller's own context, reserve the time kept
// for the answer to travel back (see withDeadline).
//
//go:noinline
func (s *Service) answer(ctx, caller context.Context, reserve time.Duration, p *plan, results []algorithms.Result, err error) (*rlsv3.RateLimitResponse, error) {
	err = rate.CheckResults(results, len(p.ops), err)
	if err != nil {
		if errors.Is(err, rate.ErrNotSent) {
			// Shed, or refused by the circuit breaker. Of a call that was
			// sent, the backend reports the fate of each op
			// (rate.Outcomes), which the give-back queue follows.
			s.deferCharges(p.ops)
		}
		return s.failed(ctx, p, err)
	}
	if err := tooLate(caller, reserve, time.Now()); err != nil && s.opts.FailureMode != FailAllow {
		// Decided after the caller gave up, or too late for the answer to
		// reach it in time: it applies its own failure mode. Only admitted
		// answers keep hits.
		s.giveBackAdmitted(p, results)
		return s.failed(ctx, p, err)
	}
	s.observeDecisions(p, results)
	if p.overLimit(results) && s.opts.RefundOnDeny {
		s.refund(ctx, p, results)
	}
	resp := p.response(results)
	if s.opts.LimitHeaders != nil {
		s.opts.LimitHeaders.add(resp)
	}
	return resp, nil
}

// withDeadline returns ctx bounded by the deadline of a request that
// arrived at arrived and whose handler started at handled: every backend
// call the request makes (the take, a second shard's, the refund of a
// denied request) must end by it. The request's budget is its caller's:
// the caller's own deadline less the reserve, the time kept for the answer
// to travel back, however far off that deadline is; BackendTimeout after
// arrival for a caller that sent none; and in either case no later than
// BackendTimeoutMax after arrival when that is set. The reserve is
// DeadlineReserve, or the time the request waited between arriving and its
// handler starting when that is longer, since on a busy host the answer
// waits for the CPU on its way out as the request did on its way in. So a
// caller that allows seconds is answered with a decision by a backend that
// takes longer than Envoy's 20ms, and the failure mode's answer, not the
// caller's timeout, reaches one that allows less than the backend takes.
// Without a BackendTimeout (the memory backend, which never waits) ctx is
// returned as it is, with no reserve.
func (s *Service) withDeadline(ctx context.Context, arrived, handled time.Time) (context.Context, context.CancelFunc, time.Duration) {
	reserve := max(s.opts.DeadlineReserve, handled.Sub(arrived))
	if s.opts.BackendTimeout <= 0 {
		return ctx, func() {}, 0
	}
	deadline := arrived.Add(s.opts.BackendTimeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = d.Add(-reserve)
	}
	if limit := s.opts.BackendTimeoutMax; limit > 0 && arrived.Add(limit).Before(deadline) {
		deadline = arrived.Add(limit)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	return ctx, cancel, reserve
}

// ErrLate is the error of a request decided when less than the time kept
// for its answer's way back (see Service.withDeadline) was left of its
// caller's deadline: the answer would reach the caller too late, so its
// admitted hits are given back and it gets the failure mode's answer.
var ErrLate = errors.New("rls: decided too late for the answer to reach the caller before its deadline")

// tooLate returns the caller's error when it has gone, ErrLate when less
// than reserve is left at now of its deadline, and nil otherwise.
func tooLate(caller context.Context, reserve time.Duration, now time.Time) error {
	if err := caller.Err(); err != nil {
		return err
	}
	if d, ok := caller.Deadline(); ok && d.Sub(now) < reserve {
		return ErrLate
	}
	return nil
}

// observeDecisions tells the observer what each limit of p decided.
func (s *Service) observeDecisions(p *plan, results []algorithms.Result) {
	if _, nop := s.observer.(nopObserver); nop {
		return
	}
	for i, r := range results {
		op := &p.ops[i]
		if op.Loosens() {
			continue
		}
		l := p.limits[i]
		d := LimitDecision{
			Domain:     p.domain,
			Descriptor: p.descs[l.desc].metricKey,
			Limit:      l.limit.Name,
			Algorithm:  op.Limit.Algorithm,
			Window:     op.Limit.Window,
			Override:   l.override,
			Hits:       op.Hits,
			Charge:     op.Kind == rate.Charge,
		}
		if r.Allowed {
			d.NearLimit = s.nearLimit(op.Limit.Capacity(), r.Remaining)
		} else {
			d.OverLimit = true
			d.Shadowed = l.shadow
		}
		s.observer.ObserveLimit(d)
	}
}

// nearLimit reports whether a limit of capacity with remaining left is used
// at or above the near-limit ratio, in exact integer arithmetic.
func (s *Service) nearLimit(capacity, remaining uint64) bool {
	used := uint64(0)
	if remaining < capacity {
		used = capacity - remaining
	}
	// capacity ≤ 2^32 and the ratio ≤ 10^6 parts per million, so neither
	// product overflows.
	return used*ppm >= s.nearLimitPPM*capacity
}

// ppm is one million, the denominator of the near-limit ratio.
const ppm = 1_000_000

// refund gives back what the admitted takes of a denied request consumed,
// and replaces their results with the state after the refund. Charges are
// usage already spent: they stay. It runs within ctx, the take's own
// deadline: a denied request waits for the backend no longer than an
// admitted one.
func (s *Service) refund(ctx context.Context, p *plan, results []algorithms.Result) {
	var refunds []rate.Op
	var index []int
	for i, op := range p.ops {
		r := results[i]
		if op.Kind != rate.Take || !r.Allowed || op.Hits == 0 {
			continue
		}
		op.Kind = rate.Refund
		op.Receipt = r.Receipt
		refunds = append(refunds, op)
		index = append(index, i)
	}
	if len(refunds) == 0 {
		return
	}
	after, err := s.limiter.Do(ctx, refunds)
	if err = rate.CheckResults(after, len(refunds), err); err != nil {
		s.log.WarnContext(ctx, "refund of a denied request failed", "domain", p.domain, "ops", len(refunds), "err", err)
		return
	}
	for j, i := range index {
		after[j].Receipt = results[i].Receipt
		results[i] = after[j]
	}
}

// giveBackAdmitted reports every take of p that results admitted to
// Options.Outcomes, as applied for a caller that got no use of it, so that
// its hits are given back. Charges stay: they are usage already spent.
func (s *Service) giveBackAdmitted(p *plan, results []algorithms.Result) {
	var out []rate.Outcome
	at := time.Now()
	for i, op := range p.ops {
		if op.Kind != rate.Take || op.Hits == 0 || !results[i].Allowed {
			continue
		}
		out = append(out, rate.Outcome{Op: op, Fate: rate.Applied, Result: results[i], At: at})
	}
	s.opts.Outcomes.Report(out)
}

// deferCharges reports the charges among ops, which never reached the
// backend (the request was shed, or the circuit breaker was open), to
// Options.Outcomes as not applied, to be recorded as soon as the backend
// answers: a charge is usage already spent, and Envoy, which sends it once
// the stream is done, does not send it again.
func (s *Service) deferCharges(ops []rate.Op) {
	var out []rate.Outcome
	at := time.Now()
	for _, op := range ops {
		if op.Kind == rate.Charge && op.Hits > 0 {
			out = append(out, rate.Outcome{Op: op, Fate: rate.NotApplied, At: at})
		}
	}
	s.opts.Outcomes.Report(out)
}

// failed answers a request whose backend call failed, as the failure mode
// says.
func (s *Service) failed(ctx context.Context, p *plan, err error) (*rlsv3.RateLimitResponse, error) {
	// Debug, not Warn: while the backend is down every request fails, and
	// the breaker and the health check already say so once.
	s.log.DebugContext(ctx, "backend failed", "domain", p.domain, "failure_mode", s.opts.FailureMode.String(), "err", err)
	switch s.opts.FailureMode {
	case FailAllow:
		return p.failureResponse(rlsv3.RateLimitResponse_OK), nil
	case FailDeny:
		return p.failureResponse(rlsv3.RateLimitResponse_OVER_LIMIT), nil
	default:
		return nil, status.Errorf(codes.Unavailable, "rls: rate limit backend unavailable: %v", err)
	}
}

// validateRequest rejects what no configuration could make sense of, and
// requests larger than b allows.
func validateRequest(req *rlsv3.RateLimitRequest, b *Bounds) error {
	if req.GetDomain() == "" {
		return status.Error(codes.InvalidArgument, "rls: domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return status.Error(codes.InvalidArgument, "rls: request has no descriptors")
	}
	if err := b.checkSize(req); err != nil {
		return err
	}
	for i, d := range req.GetDescriptors() {
		if len(d.GetEntries()) == 0 {
			return status.Errorf(codes.InvalidArgument, "rls: descriptors[%d] has no entries", i)
		}
		for j, e := range d.GetEntries() {
			if e.GetKey() == "" {
				return status.Errorf(codes.InvalidArgument, "rls: descriptors[%d].entries[%d] has an empty key", i, j)
			}
		}
	}
	return nil
}
