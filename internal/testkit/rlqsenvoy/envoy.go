package rlqsenvoy

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// DefaultReportInterval is how often Envoy reports every bucket's usage. Envoy
// hard-codes it, and ignores the reporting_interval of the bucket settings.
const DefaultReportInterval = 5 * time.Second

// Settings are what the model reads of one bucket's
// RateLimitQuotaBucketSettings: what a matched bucket does before its first
// assignment and after one expires. Envoy reads them when it creates the
// bucket, and keeps them with it until the bucket is abandoned.
type Settings struct {
	// NoAssignment is no_assignment_behavior.fallback_rate_limit, which
	// decides requests before the first assignment and after an assignment
	// (and its fallback) expires. nil is ALLOW_ALL, Envoy's default. Only a
	// blanket DENY_ALL denies; requests_per_time_unit allows everything. A
	// token_bucket is refused: Envoy creates no token bucket for it, and
	// crashes on the bucket's second request.
	NoAssignment *typev3.RateLimitStrategy
	// ExpiredFallback is expired_assignment_behavior.fallback_rate_limit,
	// which takes over when an assignment's time to live runs out. nil is
	// none: the bucket goes straight back to NoAssignment.
	// reuse_last_assignment is not modelled: Envoy does not implement it.
	ExpiredFallback *typev3.RateLimitStrategy
	// ExpiredTimeout is expired_assignment_behavior_timeout, in whole
	// seconds, after which ExpiredFallback ends and NoAssignment decides.
	// Zero, Envoy's default, ends the fallback at once. The API says the
	// bucket is then abandoned; Envoy keeps it and its unreported usage.
	ExpiredTimeout time.Duration
}

// validate refuses settings Envoy cannot run.
func (s Settings) validate() error {
	if s.NoAssignment.GetTokenBucket() != nil {
		return errors.New("rlqsenvoy: a token_bucket no_assignment_behavior crashes Envoy (it builds no token bucket for it)")
	}
	return nil
}

// Config configures an Envoy: its filter's domain, the buckets' settings,
// and the clock.
type Config struct {
	// Domain is the filter's domain, sent with every report.
	Domain string
	// Settings are the settings of every bucket, unless SettingsFor is set.
	Settings Settings
	// SettingsFor, when set, gives the settings of each bucket at its
	// creation, as Envoy's bucket matchers give each bucket those of the
	// matcher that built it. Settings it returns with a token_bucket
	// NoAssignment make Request panic.
	SettingsFor func(bucket map[string]string) Settings
	// ReportInterval is how often every bucket is reported; zero is
	// DefaultReportInterval, the only interval Envoy uses.
	ReportInterval time.Duration
	// Now is the clock; nil is time.Now. With a fake clock, the Envoy does
	// nothing of its own: its timers (reports, expiries) run when a call
	// (Request, Tick, a response's arrival) finds them due, each at its own
	// deadline, in the order of their deadlines.
	Now func() time.Time
}

// EventKind says what an Event did to a bucket.
type EventKind int

// The events of a bucket's history.
const (
	// Assigned is a quota_assignment_action taking effect: a blanket rule,
	// or a token bucket new or different from the cached one.
	Assigned EventKind = iota + 1
	// Kept is a token_bucket assignment identical to the cached one: the
	// bucket keeps its token bucket as it is, and the new time to live.
	Kept
	// Skipped is an assignment Envoy drops: requests_per_time_unit, or no
	// strategy at all. The cached action, and its expiry, stay.
	Skipped
	// Unset is an action that is neither an assignment nor an abandon.
	// Envoy caches it anyway: it allows every request, and expires at once.
	Unset
	// Abandoned is an abandon_action: the bucket is erased, with its usage
	// not yet reported.
	Abandoned
	// Dropped is an action for a bucket the Envoy does not hold: never
	// created, or abandoned.
	Dropped
	// Expired is an assignment's time to live running out: the bucket falls
	// back to ExpiredFallback, or to NoAssignment.
	Expired
	// FallbackEnded is ExpiredTimeout running out: NoAssignment decides.
	FallbackEnded
)

var eventNames = [...]string{"?", "assigned", "kept", "skipped", "unset", "abandoned", "dropped", "expired", "fallback ended"}

// String names the kind.
func (k EventKind) String() string {
	if k < 0 || int(k) >= len(eventNames) {
		return "EventKind(" + strconv.Itoa(int(k)) + ")"
	}
	return eventNames[k]
}

// Event is one change, or refusal to change, of a bucket's action.
type Event struct {
	At   time.Time
	Kind EventKind
	// Strategy is the strategy that decides the bucket's requests after the
	// event; nil is the bucket's NoAssignment (or, after Abandoned, no
	// bucket).
	Strategy *typev3.RateLimitStrategy
	// TTL is the time to live an Assigned, Kept or Unset event started, in
	// whole seconds, and for Expired the ExpiredTimeout of its fallback.
	TTL time.Duration
}

// Counters count what went to and came from the RLQS server.
type Counters struct {
	// Streams is the number of streams opened.
	Streams int
	// ReportsSent is the number of reports handed to a stream.
	ReportsSent int
	// ReportsLost is the number of reports built, their usage taken from
	// the buckets, and never sent: no stream was open for a new bucket's
	// report, a stream could not be reopened for a periodic one, or the
	// stream refused it.
	ReportsLost int
	// Responses is the number of responses applied.
	Responses int
}

// Envoy is a model of one Envoy's rate_limit_quota filter, as a client of an
// RLQS server: the buckets of one filter domain and RLQS server, their
// actions, and their one stream. Its methods are safe for concurrent use.
type Envoy struct {
	client rlqsv3.RateLimitQuotaServiceClient
	cfg    Config
	now    func() time.Time
	base   time.Time // the moment the token buckets count seconds from

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	buckets   map[string]*bucket // the cache, by key
	records   map[string]*record // totals and histories, by key, for good
	stream    *stream            // nil: no stream open
	started   bool               // the first bucket started the stream and the report timer
	timers    timers
	reportSeq uint64 // the seq of the live report timer
	seq       uint64
	counters  Counters
	changed   chan struct{} // closed and replaced when a response is applied or a stream ends
}

// bucket is one cached bucket: Envoy's CachedBucket with its QuotaUsage.
type bucket struct {
	id       map[string]string
	settings Settings

	allowed, denied uint64 // usage since the last report
	lastReport      time.Time

	// assigned says an action is cached: strategy decides requests (nil
	// allows them all). Otherwise the settings' NoAssignment decides.
	assigned bool
	strategy *typev3.RateLimitStrategy
	tokens   *tokenBucket

	timer    timerKind
	timerSeq uint64
}

type timerKind int

const (
	noTimer timerKind = iota
	actionTimer
	fallbackTimer
)

// record is what the tests read of a bucket key: totals over every bucket
// of that key, and every event.
type record struct {
	allowed, denied uint64
	events          []Event
}

// stream is one open StreamRateLimitQuotas call.
type stream struct {
	calls  rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient
	cancel context.CancelFunc
}

// New returns an Envoy that reports to client. It opens no stream before its
// first request: Envoy opens it when it creates its first bucket.
func New(client rlqsv3.RateLimitQuotaServiceClient, cfg Config) (*Envoy, error) {
	if err := cfg.Settings.validate(); err != nil {
		return nil, err
	}
	if cfg.ReportInterval <= 0 {
		cfg.ReportInterval = DefaultReportInterval
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Envoy{
		client:  client,
		cfg:     cfg,
		now:     now,
		base:    now(),
		ctx:     ctx,
		cancel:  cancel,
		buckets: make(map[string]*bucket),
		records: make(map[string]*record),
		changed: make(chan struct{}),
	}, nil
}

// Close ends the stream, and any stream to come: later reports are lost.
func (e *Envoy) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancel()
	e.dropStream()
}

// Request decides one request matched into bucket, as Envoy does, and
// counts it into the bucket's usage. A bucket seen for the first time is
// created: its first request is allowed unless its NoAssignment is a
// blanket DENY_ALL, and a report of that one request goes out at once if a
// stream is open (the very first bucket opens it; later ones never do).
func (e *Envoy) Request(bucket map[string]string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.runTimers(now)
	k := key(bucket)
	rec := e.record(k)
	b := e.buckets[k]
	var allowed bool
	if b != nil {
		allowed = e.decide(b, now)
		if allowed {
			b.allowed++
		} else {
			b.denied++
		}
	} else {
		settings := e.cfg.Settings
		if e.cfg.SettingsFor != nil {
			settings = e.cfg.SettingsFor(bucket)
			if err := settings.validate(); err != nil {
				panic(err)
			}
		}
		allowed = !isBlanket(settings.NoAssignment, typev3.RateLimitStrategy_DENY_ALL)
		e.create(now, k, maps.Clone(bucket), settings, allowed)
	}
	if allowed {
		rec.allowed++
	} else {
		rec.denied++
	}
	return allowed
}

// Tick runs the timers due by now: periodic reports (reopening the stream
// if it is closed) and expiries. With a fake clock, call it after moving
// the clock.
func (e *Envoy) Tick() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runTimers(e.now())
}

// Run calls Tick every interval until ctx is done: the real-time mode, for
// an Envoy on the real clock.
func (e *Envoy) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Tick()
		}
	}
}

// Disconnect loses the stream, as when the server or the network ends it.
// Cached actions stay until their time to live; the next periodic report
// opens a new stream.
func (e *Envoy) Disconnect() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropStream()
	e.notify()
}

// Connected reports whether a stream is open.
func (e *Envoy) Connected() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stream != nil
}

// Totals returns how many requests of bucket were allowed and denied since
// the Envoy started, over every bucket of that id (one abandoned and made
// again included).
func (e *Envoy) Totals(bucket map[string]string) (allowed, denied uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.records[key(bucket)]; r != nil {
		return r.allowed, r.denied
	}
	return 0, 0
}

// History returns the events of bucket's actions, oldest first, actions
// dropped for want of the bucket included.
func (e *Envoy) History(bucket map[string]string) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.records[key(bucket)]; r != nil {
		return slices.Clone(r.events)
	}
	return nil
}

// Tokens returns the tokens bucket's token bucket holds now, fractions
// included, and false when the bucket is not cached or has no token
// bucket. It runs the timers due first.
func (e *Envoy) Tokens(bucket map[string]string) (float64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.runTimers(now)
	b := e.buckets[key(bucket)]
	if b == nil || b.tokens == nil {
		return 0, false
	}
	return b.tokens.remaining(e.seconds(now)), true
}

// Counters returns what went to and came from the server so far.
func (e *Envoy) Counters() Counters {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counters
}

// WaitResponses waits until n responses in all have been applied.
func (e *Envoy) WaitResponses(ctx context.Context, n int) error {
	for {
		e.mu.Lock()
		got, changed := e.counters.Responses, e.changed
		e.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rlqsenvoy: %d of %d responses applied: %w", got, n, ctx.Err())
		case <-changed:
		}
	}
}

// create is Envoy's createBucketImpl: the first bucket starts the stream
// and the report timer; the bucket starts with its first request counted,
// and a report of it goes at once to the open stream, if any.
func (e *Envoy) create(now time.Time, k string, id map[string]string, settings Settings, allowed bool) {
	if !e.started {
		e.started = true
		e.armReport(now.Add(e.cfg.ReportInterval))
		e.openStream()
	}
	b := &bucket{id: id, settings: settings, lastReport: now}
	if allowed {
		b.allowed = 1
	} else {
		b.denied = 1
	}
	e.buckets[k] = b
	e.send(e.report(now, []*bucket{b}))
}

// decide is Envoy's shouldAllowRequest: the cached action's strategy, or the
// NoAssignment one.
func (e *Envoy) decide(b *bucket, now time.Time) bool {
	s := b.settings.NoAssignment
	if b.assigned {
		s = b.strategy
	}
	switch st := s.GetStrategy().(type) {
	case *typev3.RateLimitStrategy_BlanketRule_:
		return st.BlanketRule != typev3.RateLimitStrategy_DENY_ALL
	case *typev3.RateLimitStrategy_TokenBucket:
		return b.tokens.take(e.seconds(now))
	default: // requests_per_time_unit is not enforced; no strategy fails open
		return true
	}
}

// report builds the usage report of bs at moment now, as Envoy's
// buildReports does: each bucket's counts since its last report, which it
// resets, and the whole seconds since then. Every report carries the
// domain.
func (e *Envoy) report(now time.Time, bs []*bucket) *rlqsv3.RateLimitQuotaUsageReports {
	r := &rlqsv3.RateLimitQuotaUsageReports{Domain: e.cfg.Domain}
	for _, b := range bs {
		r.BucketQuotaUsages = append(r.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &rlqsv3.BucketId{Bucket: maps.Clone(b.id)},
			TimeElapsed:        &durationpb.Duration{Seconds: int64(now.Sub(b.lastReport) / time.Second)},
			NumRequestsAllowed: b.allowed,
			NumRequestsDenied:  b.denied,
		})
		b.allowed, b.denied, b.lastReport = 0, 0, now
	}
	return r
}

// send hands r to the stream. Without a stream, or when the stream refuses
// it, r is lost, and its usage with it.
func (e *Envoy) send(r *rlqsv3.RateLimitQuotaUsageReports) {
	if e.stream == nil || e.stream.calls.Send(r) != nil {
		e.counters.ReportsLost++
		return
	}
	e.counters.ReportsSent++
}

// periodic is the report timer: every bucket's usage goes into one report,
// sorted by key (Envoy's order is its hash map's), and the stream is
// reopened for it if it is closed. If it cannot be, the report is lost.
func (e *Envoy) periodic(at time.Time) {
	e.armReport(at.Add(e.cfg.ReportInterval))
	keys := slices.Sorted(maps.Keys(e.buckets))
	bs := make([]*bucket, len(keys))
	for i, k := range keys {
		bs[i] = e.buckets[k]
	}
	r := e.report(at, bs)
	if e.stream == nil && !e.openStream() {
		e.counters.ReportsLost++
		return
	}
	e.send(r)
}

// openStream starts a stream and its receiver, and reports whether it could.
func (e *Envoy) openStream() bool {
	ctx, cancel := context.WithCancel(e.ctx)
	calls, err := e.client.StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		return false
	}
	s := &stream{calls: calls, cancel: cancel}
	e.stream = s
	e.counters.Streams++
	go e.receive(s)
	return true
}

// dropStream forgets the stream, ending its call.
func (e *Envoy) dropStream() {
	if e.stream != nil {
		e.stream.cancel()
		e.stream = nil
	}
}

// receive applies the responses of s until it ends.
func (e *Envoy) receive(s *stream) {
	for {
		resp, err := s.calls.Recv()
		e.mu.Lock()
		if e.stream != s {
			e.mu.Unlock()
			return
		}
		if err != nil {
			e.stream = nil
			s.cancel()
			e.notify()
			e.mu.Unlock()
			return
		}
		now := e.now()
		e.runTimers(now)
		for _, a := range resp.GetBucketAction() {
			e.apply(now, a)
		}
		e.counters.Responses++
		e.notify()
		e.mu.Unlock()
	}
}

// apply is one action of a response, as Envoy's onQuotaResponseImpl applies
// it.
func (e *Envoy) apply(now time.Time, a *rlqsv3.RateLimitQuotaResponse_BucketAction) {
	id := a.GetBucketId().GetBucket()
	if len(id) == 0 {
		return // Envoy logs the missing id and goes on
	}
	k := key(id)
	rec := e.record(k)
	b := e.buckets[k]
	if b == nil {
		rec.events = append(rec.events, Event{At: now, Kind: Dropped})
		return
	}
	switch act := a.GetBucketAction().(type) {
	case *rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_:
		delete(e.buckets, k)
		rec.events = append(rec.events, Event{At: now, Kind: Abandoned})
	case *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_:
		s := act.QuotaAssignmentAction.GetRateLimitStrategy()
		kind := Assigned
		switch st := s.GetStrategy().(type) {
		case *typev3.RateLimitStrategy_BlanketRule_:
			b.tokens = nil
		case *typev3.RateLimitStrategy_TokenBucket:
			if e.replaces(b, st.TokenBucket) {
				b.tokens = newTokenBucket(st.TokenBucket, e.seconds(now), b.tokens)
			} else {
				kind = Kept
			}
		default:
			rec.events = append(rec.events, Event{At: now, Kind: Skipped, Strategy: b.current()})
			return
		}
		b.assigned, b.strategy = true, proto.Clone(s).(*typev3.RateLimitStrategy)
		ttl := wholeSeconds(act.QuotaAssignmentAction.GetAssignmentTimeToLive().GetSeconds())
		e.arm(b, actionTimer, now.Add(ttl))
		rec.events = append(rec.events, Event{At: now, Kind: kind, Strategy: b.strategy, TTL: ttl})
	default:
		// Neither assignment nor abandon: cached with no strategy, which
		// allows every request, and a time to live of zero.
		b.assigned, b.strategy, b.tokens = true, nil, nil
		e.arm(b, actionTimer, now)
		rec.events = append(rec.events, Event{At: now, Kind: Unset})
	}
}

// replaces is Envoy's shouldReplaceTokenBucket: a token bucket strategy
// replaces the bucket's token bucket unless the cached action is a token
// bucket the same by sameTokenBucket.
func (e *Envoy) replaces(b *bucket, tb *typev3.TokenBucket) bool {
	cached := b.strategy.GetTokenBucket()
	return !b.assigned || cached == nil || !sameTokenBucket(tb, cached)
}

// expire is the action expiration timer of b, at moment at: the fallback
// takes over, for ExpiredTimeout, or the bucket goes back to NoAssignment.
func (e *Envoy) expire(k string, b *bucket, at time.Time) {
	rec := e.record(k)
	fb := b.settings.ExpiredFallback
	if fb == nil {
		b.assigned, b.strategy, b.tokens = false, nil, nil
		b.timer = noTimer
		rec.events = append(rec.events, Event{At: at, Kind: Expired})
		return
	}
	if tb := fb.GetTokenBucket(); tb != nil {
		if e.replaces(b, tb) {
			b.tokens = newTokenBucket(tb, e.seconds(at), b.tokens)
		}
	} else {
		b.tokens = nil
	}
	b.assigned, b.strategy = true, fb
	ttl := wholeSeconds(int64(b.settings.ExpiredTimeout / time.Second))
	e.arm(b, fallbackTimer, at.Add(ttl))
	rec.events = append(rec.events, Event{At: at, Kind: Expired, Strategy: fb, TTL: ttl})
}

// endFallback is the fallback expiration timer: NoAssignment decides.
func (e *Envoy) endFallback(k string, b *bucket, at time.Time) {
	b.assigned, b.strategy, b.tokens = false, nil, nil
	b.timer = noTimer
	rec := e.record(k)
	rec.events = append(rec.events, Event{At: at, Kind: FallbackEnded})
}

// current is the strategy deciding b's requests; nil is NoAssignment.
func (b *bucket) current() *typev3.RateLimitStrategy {
	if b.assigned {
		return b.strategy
	}
	return nil
}

// record returns the record of key k, making it.
func (e *Envoy) record(k string) *record {
	r := e.records[k]
	if r == nil {
		r = &record{}
		e.records[k] = r
	}
	return r
}

// seconds is moment t in the token buckets' seconds.
func (e *Envoy) seconds(t time.Time) float64 {
	return t.Sub(e.base).Seconds()
}

// notify wakes WaitResponses.
func (e *Envoy) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// timer is one armed timer: the report timer, or the expiry of the bucket
// of key. It is stale once the report timer, or its bucket, has been armed
// again.
type timer struct {
	at     time.Time
	seq    uint64
	report bool
	key    string
}

// timers is a heap of timers by deadline, then by arming order.
type timers []timer

func (h timers) Len() int { return len(h) }
func (h timers) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timers) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timers) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// arm sets b's one timer, replacing any other: Envoy gives each new
// CachedBucket its own timers, and a timer whose bucket was replaced does
// nothing.
func (e *Envoy) arm(b *bucket, kind timerKind, at time.Time) {
	e.seq++
	b.timer, b.timerSeq = kind, e.seq
	heap.Push(&e.timers, timer{at: at, seq: e.seq, key: key(b.id)})
}

// armReport sets the report timer.
func (e *Envoy) armReport(at time.Time) {
	e.seq++
	e.reportSeq = e.seq
	heap.Push(&e.timers, timer{at: at, seq: e.seq, report: true})
}

// runTimers runs every timer due by now, each at its deadline.
func (e *Envoy) runTimers(now time.Time) {
	for len(e.timers) > 0 && !e.timers[0].at.After(now) {
		t := heap.Pop(&e.timers).(timer)
		if t.report {
			if t.seq == e.reportSeq {
				e.periodic(t.at)
			}
			continue
		}
		b := e.buckets[t.key]
		if b == nil || b.timerSeq != t.seq {
			continue
		}
		switch b.timer {
		case actionTimer:
			e.expire(t.key, b, t.at)
		case fallbackTimer:
			e.endFallback(t.key, b, t.at)
		}
	}
}

// wholeSeconds is a time to live Envoy reads as whole seconds; a negative
// one runs out at once.
func wholeSeconds(s int64) time.Duration {
	const most = int64(1<<63-1) / int64(time.Second)
	return time.Duration(min(max(s, 0), most)) * time.Second
}

// isBlanket reports whether s is the blanket rule r.
func isBlanket(s *typev3.RateLimitStrategy, r typev3.RateLimitStrategy_BlanketRule) bool {
	br, ok := s.GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	return ok && br.BlanketRule == r
}

// key is the cache key of a bucket id: its pairs sorted, quoted. Envoy
// hashes the BucketId message, in which the order of the map is not part
// of the id either.
func key(id map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(id)) {
		sb.WriteString(strconv.Quote(k))
		sb.WriteByte('=')
		sb.WriteString(strconv.Quote(id[k]))
		sb.WriteByte(',')
	}
	return sb.String()
}
