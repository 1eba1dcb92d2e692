// Package rlqs is ratewarden's Rate Limit Quota Service
// (envoy.service.rate_limit_quota.v3): Envoy enforces locally, from token
// buckets the service grants it, and reports its usage per bucket on a
// stream. Each grant is k hits reserved on the bucket's limit in one
// backend call, as a lease reserves them, and handed to the Envoy as a
// token bucket of k tokens that does not refill within its time to live:
// every request an Envoy admits was admitted under a grant, and the grants
// of a window never add up past the limit, across any number of Envoys and
// servers. The reports settle the grants: what an Envoy reports it allowed
// is counted where it was granted, and what a grant did not serve is given
// back once no report can carry hits of it any more.
//
// A bucket id (a map of strings) and the report's domain select a rule as a
// descriptor does (Entries).
package rlqs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Options configure New.
type Options struct {
	// Limiter decides the grants: the backend, without leases of its own.
	Limiter rate.Limiter
	// Config returns the limits in force.
	Config func() *config.Config
	// ReportInterval is how often an Envoy reports every bucket: Envoy's
	// is 5 s, fixed.
	ReportInterval time.Duration
	// MinGrant is the fewest hits a grant reserves when the limit has room
	// for them.
	MinGrant uint64
	// Timeout bounds each backend call.
	Timeout time.Duration
	// ShadowMode (RLS_SHADOW_MODE) records every granted rule's usage
	// instead of granting it: no bucket is denied.
	ShadowMode bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observer is told the grants, the usage reported and the streams;
	// nil observes nothing.
	Observer Observer
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
	// answered, when set, is called after each report is answered (the
	// tests, on a fake clock).
	answered func()
}

// DefaultOptions returns the Options of a server: Envoy's report interval,
// grants of at least 10 hits, and backend calls of at most a second.
func DefaultOptions() Options {
	return Options{ReportInterval: 5 * time.Second, MinGrant: 10, Timeout: time.Second}
}

// Server serves StreamRateLimitQuotas. It is safe for concurrent use.
type Server struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	opts      Options
	drained   chan struct{}
	drainOnce sync.Once
	// ahead is, in microseconds, how far ahead of the server's clock the
	// backend's was at most when it last made a grant: a grant decided at
	// its receipt's time R, by a call sent at s0 by the server's clock, puts
	// the backend's clock at most R − s0 ahead. A settlement says its hits
	// were served when the report came, moved on by that much: a sliding
	// log then logs them no earlier than the backend's clock had them.
	ahead atomic.Int64
}

// New returns a Server as opts say.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Limiter == nil:
		return nil, errors.New("rlqs: no limiter")
	case opts.Config == nil:
		return nil, errors.New("rlqs: no limits")
	case opts.ReportInterval < time.Second:
		return nil, fmt.Errorf("rlqs: a report interval of at least a second, not %s", opts.ReportInterval)
	case opts.MinGrant == 0:
		return nil, errors.New("rlqs: grants of at least one hit")
	case opts.Timeout <= 0:
		return nil, fmt.Errorf("rlqs: a positive timeout, not %s", opts.Timeout)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	return &Server{opts: opts, drained: make(chan struct{})}, nil
}

// Drain ends every stream, and every stream opened from now on, as a
// server that stops must: a stream lasts as long as its Envoy, so a
// graceful stop would otherwise wait for its whole timeout. Each stream's
// grants end as fully served; its Envoy serves them until their time to
// live and reopens its stream at its next report, on another server.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drained) }) }

// StreamRateLimitQuotas serves one Envoy: the stream is the holder of its
// grants. Each report is answered with the actions of the buckets it
// changes; when the stream ends, its grants end as fully served, since what
// its Envoy still admits under them is never reported on it.
func (s *Server) StreamRateLimitQuotas(stream rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	held := map[string]*holding{}
	opened := s.opts.Now()
	s.opts.Observer.ObserveStreams(1)
	defer s.opts.Observer.ObserveStreams(-1)
	defer func() {
		var ops []rate.Op
		for _, h := range held {
			now := s.opts.Now()
			ops = append(ops, h.settlement(now, s.aheadBy(), true)...)
		}
		s.send(context.Background(), ops)
	}()
	received := make(chan *rlqsv3.RateLimitQuotaUsageReports)
	failed := make(chan error, 1)
	go func() {
		for {
			reports, err := stream.Recv()
			if err != nil {
				failed <- err
				return
			}
			select {
			case received <- reports:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	for {
		var reports *rlqsv3.RateLimitQuotaUsageReports
		select {
		case reports = <-received:
		case err := <-failed:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-s.drained:
			return nil
		}
		resp := s.answer(stream.Context(), held, opened, reports)
		if len(resp.GetBucketAction()) > 0 {
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
		if s.opts.answered != nil {
			s.opts.answered()
		}
	}
}

// answer settles what reports says of each bucket and returns the actions
// that grant the buckets that need it.
func (s *Server) answer(ctx context.Context, held map[string]*holding, opened time.Time, reports *rlqsv3.RateLimitQuotaUsageReports) *rlqsv3.RateLimitQuotaResponse {
	now := s.opts.Now()
	resp := &rlqsv3.RateLimitQuotaResponse{}
	var ops []rate.Op
	type want struct {
		h   *holding
		id  *rlqsv3.BucketId
		k   uint64
		ttl time.Duration
	}
	var wants []want
	for _, u := range reports.GetBucketQuotaUsages() {
		id := u.GetBucketId()
		entries := Entries(id.GetBucket())
		key := bucketKey(reports.GetDomain(), entries)
		h := held[key]
		if h == nil || h.cfg != s.opts.Config() {
			// A new bucket, or new limits: the bucket's rule now. Grants
			// taken before stay with the limit they were taken on.
			nh := s.resolve(reports.GetDomain(), entries)
			if h != nil {
				nh.grants = h.grants
				if g := nh.current(); g != nil && (nh.unlimited || nh.recorded) {
					g.superseded = now // replaced by ALLOW_ALL below
				}
			}
			held[key] = nh
			h = nh
			if h.unlimited || h.recorded {
				resp.BucketAction = append(resp.BucketAction, assign(id, allowAll(), unlimitedTTL))
			}
		}
		if !h.granted && !h.unlimited && !h.recorded && len(h.grants) == 0 {
			continue // no rule the service can grant: Envoy's own behaviour applies
		}
		h.reported()
		if h.granted || h.recorded {
			s.opts.Observer.ObserveUsage(&h.op, u.GetNumRequestsAllowed(), u.GetNumRequestsDenied())
		}
		extra := h.attribute(u.GetNumRequestsAllowed())
		switch {
		case extra > 0 && h.recorded:
			// Shadow mode: what the Envoy allowed is counted, after the
			// fact, where RateLimitService counts the same entries.
			charge := h.op
			charge.Kind, charge.Hits = rate.Charge, extra
			ops = append(ops, charge)
		case extra > 0 && h.granted && now.Sub(opened) >= s.life():
			// Allowed with no grant (the Envoy's own fallback): usage
			// already spent, recorded as a charge. Not while a grant of
			// the Envoy's last stream may still be served: that stream's
			// end counted its grants as fully served.
			charge := h.op
			charge.Kind, charge.Hits = rate.Charge, extra
			ops = append(ops, charge)
			s.opts.Observer.ObserveUngranted(&h.op, extra)
		}
		ops = append(ops, h.settlement(now, s.aheadBy(), false)...)
		if !h.granted {
			continue
		}
		if k, ttl := s.size(h, u, now); k > 0 {
			wants = append(wants, want{h: h, id: id, k: k, ttl: ttl})
		}
	}
	// The settlements and the grants' takes go in one call, settlements
	// first so that the takes find the room they give back; a take denied
	// for want of all it asked is asked again for the room there is.
	settled := len(ops)
	for _, w := range wants {
		ops = append(ops, s.takeOf(w.h, w.k, w.ttl))
	}
	got := s.send(ctx, ops)
	if got == nil {
		return resp
	}
	for i, w := range wants {
		var a *typev3.RateLimitStrategy
		var ttl time.Duration
		switch r := got[settled+i]; {
		case r.Allowed:
			a, ttl = s.accept(ctx, w.h, r, w.k, w.ttl, now)
		case r.Remaining > 0 && r.Remaining < w.k:
			s.opts.Observer.ObserveShort(&w.h.op)
			a, ttl = s.grant(ctx, w.h, r.Remaining, w.ttl, now)
		default:
			s.opts.Observer.ObserveShort(&w.h.op)
		}
		if a != nil {
			resp.BucketAction = append(resp.BucketAction, assign(w.id, denyAll(), time.Second), assign(w.id, a, ttl))
		}
	}
	return resp
}

// resolve returns the holding of a bucket id's rule in domain, in the
// limits in force, as Decide says: unlimited for an unlimited rule (or a
// shadow one whose usage cannot be counted), granted for a rule a grant
// can count on, recorded for one in shadow mode, and none of them when no
// rule matches or the rule is another.
func (s *Server) resolve(domain string, entries []rate.Entry) *holding {
	cfg := s.opts.Config()
	h := &holding{cfg: cfg}
	if cfg == nil || len(entries) == 0 {
		return h
	}
	m, ok := cfg.Match(domain, entries)
	d := Decide(m.Rule)
	if d.Answer == Grant && s.opts.ShadowMode {
		d.Answer = Record
	}
	switch {
	case !ok:
		return h
	case d.Answer == AllowAll:
		h.unlimited = true
		return h
	case d.Answer == NoAssignment:
		s.opts.Logger.Warn("rlqs: a bucket's rule is not one a grant can count on",
			"domain", domain, "rule", m.MetricKey, "why", d.Why)
		return h
	}
	h.op = rate.Op{Key: m.Key, Limit: d.Limit.Limit, Tag: m.MetricKey}
	h.op.ID = h.op.Identity()
	h.granted, h.recorded = d.Answer == Grant, d.Answer == Record
	return h
}

// size returns how many hits to grant h's Envoy now, after its report u,
// and for how long (whole seconds, as Envoy reads them); 0 when its grant
// in hand serves until the next report. A grant is sized from what the
// Envoy asked for (allowed and denied) in the last report's time: for the
// time until its next report with a tenth to spare (reach), lasting two
// report intervals; or, for a hot bucket of a fixed window (at least
// hotRequests until the next report, and twice that at most a tenth of the
// limit), for two reports' time, lasting three, so that it is granted at
// every other report. Only a fixed window: its take is three commands, and
// its room does not come back with time, so a grant held longer holds back
// nothing another Envoy could have had sooner; a sliding counter's hot
// grants admitted 87% of its limit at 1.2 times its demand, against 90%. A windowed limit's grant
// ends with its window, and is sized for no longer; every grant is at
// least MinGrant.
func (s *Server) size(h *holding, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) (uint64, time.Duration) {
	interval := s.opts.ReportInterval
	elapsed := max(u.GetTimeElapsed().AsDuration(), time.Second)
	perSecond := float64(u.GetNumRequestsAllowed()+u.GetNumRequestsDenied()) / elapsed.Seconds()
	// next is what the Envoy asks for until its next report; the grant in
	// hand is kept when it holds that, under the limits in force.
	next := perSecond * interval.Seconds() * reach
	if g := h.current(); g != nil && g.op.ID == h.op.ID && g.op.Limit == h.op.Limit && g.ends.Sub(now) > interval+inFlight {
		if float64(g.left()) >= max(next, 1) && u.GetNumRequestsDenied() == 0 {
			return 0, 0
		}
	}
	lim := h.op.Limit
	span, ttl := interval, 2*interval
	if lim.Algorithm == algorithms.FixedWindow && next >= hotRequests && 2*next <= float64(lim.Capacity())/hotShare {
		span, ttl = 2*interval, 3*interval
	}
	if lim.Algorithm.Spec().Windowed {
		// The Envoy counts the time to live from when the action reaches
		// it, up to inFlight later: the grant ends by the window's end.
		end := lim.WindowStart(lim.WindowIndex(now) + 1)
		ttl = min(ttl, end.Sub(now.Add(inFlight)).Truncate(time.Second))
	}
	if ttl < time.Second {
		return 0, 0 // the window ends within a second: the next report grants
	}
	k := uint64(math.Ceil(perSecond * min(ttl, span).Seconds() * reach))
	return min(max(k, s.opts.MinGrant), lim.Capacity(), math.MaxUint32), ttl
}

// reach is how much longer than until the next report a grant is sized to
// last: a report that comes a little late finds the Envoy still served.
// Whatever it leaves is lost to every holder when the grant is replaced:
// the replaced grant is held to have served all the requests of its
// replacement's first report it had left (attribute). At twice a limit's
// demand, three Envoys admitted 91% of a fixed window with a tenth to
// spare, 97.5% with a fiftieth.
const reach = 1.02

// hotRequests is the fewest requests until its next report for which an
// Envoy's grant covers two reports: below it, a backend call per report
// costs more than a command per thousand requests admitted only for
// buckets whose Redis cost is small beside the rest.
const hotRequests = 1000

// hotShare is the share of a limit's capacity, as its inverse, that an
// Envoy's grant for two reports may come to for it to be granted at every
// other report: what the grant holds from other Envoys is then small
// beside the limit, and the backend is called half as often.
const hotShare = 10

// life is the longest an Envoy may serve a grant after it was sent: its
// longest time to live, from when the action reaches it.
func (s *Server) life() time.Duration { return inFlight + 3*s.opts.ReportInterval }

// hold is how long the backend holds a grant of time to live ttl: past
// the latest a report can still carry its hits.
func (s *Server) hold(ttl time.Duration) time.Duration {
	return inFlight + ttl + 2*s.opts.ReportInterval + time.Second
}

// takeOf returns the take that reserves a grant of k hits of h's limit for
// ttl.
func (s *Server) takeOf(h *holding, k uint64, ttl time.Duration) rate.Op {
	take := h.op
	take.Kind, take.Hits, take.Hold = rate.Take, k, s.hold(ttl)
	return take
}

// grant reserves k hits of h's limit for ttl in a call of its own, and
// returns what accept does with the answer.
func (s *Server) grant(ctx context.Context, h *holding, k uint64, ttl time.Duration, now time.Time) (*typev3.RateLimitStrategy, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	got, err := s.do(ctx, []rate.Op{s.takeOf(h, k, ttl)})
	if err != nil {
		s.opts.Logger.Warn("rlqs: a grant failed", "rule", h.op.Tag, "hits", k, "err", err)
		return nil, 0
	}
	if !got[0].Allowed {
		return nil, 0
	}
	return s.accept(ctx, h, got[0], k, ttl, now)
}

// accept makes a grant of k hits of h's limit for ttl, which the backend
// admitted as r, and returns the token bucket that hands them to the Envoy
// and its time to live. A windowed limit's grant lives no longer than its
// window by the backend's clock, read from the grant's receipt: its time
// to live is cut to the window's end less inFlight, and a grant with less
// than a second left is given back at once (nil).
func (s *Server) accept(ctx context.Context, h *holding, r algorithms.Result, k uint64, ttl time.Duration, now time.Time) (*typev3.RateLimitStrategy, time.Duration) {
	hold := s.hold(ttl)
	if lim := h.op.Limit; lim.Algorithm.Spec().Windowed {
		decided := time.UnixMicro(r.Receipt.Decided(lim, hold))
		end := lim.WindowStart(lim.WindowIndex(decided) + 1)
		ttl = min(ttl, end.Sub(decided.Add(inFlight)).Truncate(time.Second))
	}
	if ttl < time.Second {
		back := h.op
		back.Kind, back.Leases = rate.Settle, []algorithms.Lease{{Receipt: r.Receipt, Hold: hold, Size: k, Close: true}}
		s.send(ctx, []rate.Op{back})
		return nil, 0
	}
	if c := h.current(); c != nil {
		c.superseded = now
	}
	h.grants = append(h.grants, &grant{op: h.op, receipt: r.Receipt, size: k, hold: hold, ends: now.Add(inFlight + ttl)})
	s.opts.Observer.ObserveGrant(&h.op, k)
	return tokenBucket(k), ttl
}

// send applies ops to the backend and returns their results, or nil,
// logging the failure: a settlement that fails leaves its hits counted
// (never more), a take that fails grants nothing.
func (s *Server) send(ctx context.Context, ops []rate.Op) []algorithms.Result {
	if len(ops) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	got, err := s.do(ctx, ops)
	if err != nil {
		s.opts.Logger.Warn("rlqs: a call to the backend failed", "ops", len(ops), "err", err)
		return nil
	}
	return got
}

// do applies ops to the backend, and follows its clock from the receipts
// of the takes it admits (ahead).
func (s *Server) do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	sent := s.opts.Now().UnixMicro()
	got, err := s.opts.Limiter.Do(ctx, ops)
	for i, r := range got {
		if ops[i].Kind == rate.Take && r.Allowed && r.Receipt.At != 0 {
			s.ahead.Store(r.Receipt.Decided(ops[i].Limit, ops[i].Hold) - sent)
		}
	}
	return got, err
}

// aheadBy returns how far ahead of the server's clock the backend's is, at
// most (see ahead).
func (s *Server) aheadBy() time.Duration { return time.Duration(s.ahead.Load()) * time.Microsecond }

// unlimitedTTL is how long an unlimited bucket's ALLOW_ALL lasts.
const unlimitedTTL = time.Hour

// year is the fill interval of a grant's token bucket: one token a year,
// the least Envoy refills, which a grant's time to live never reaches.
const year = 365 * 24 * time.Hour

func assign(id *rlqsv3.BucketId, st *typev3.RateLimitStrategy, ttl time.Duration) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl),
				RateLimitStrategy:    st,
			},
		},
	}
}

func tokenBucket(k uint64) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens:     uint32(k),
		TokensPerFill: wrapperspb.UInt32(1),
		FillInterval:  durationpb.New(year),
	}}}
}

func allowAll() *typev3.RateLimitStrategy { return blanket(typev3.RateLimitStrategy_ALLOW_ALL) }
func denyAll() *typev3.RateLimitStrategy  { return blanket(typev3.RateLimitStrategy_DENY_ALL) }

func blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}
