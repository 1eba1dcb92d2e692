// Package rlqsenvoy is a fake Envoy for the Rate Limit Quota Service: a
// model of Envoy's HTTP filter envoy.filters.http.rate_limit_quota as a
// client of an RLQS server, for the tests of ratewarden's RLQS server and
// for its load generator. It speaks the server's gRPC API,
// StreamRateLimitQuotas, with go-control-plane's types.
//
// An Envoy decides each Request as the filter does, from the bucket's
// cached action or, before the first one and after one expires, from the
// bucket's settings; it reports usage on one stream and applies the
// server's responses as they arrive. Its timers (the periodic report, the
// expiries) run at their deadlines on the clock it is given: with a fake
// clock a test moves time and calls Tick, and everything happens at known
// moments.
//
// What it models:
//
//   - The strategies enforced are the blanket rules ALLOW_ALL and DENY_ALL,
//     and token_bucket, one token a request. requests_per_time_unit is not
//     enforced: as a bucket's setting it allows everything, and as an
//     assignment it is skipped, the previous action staying, its expiry
//     too.
//   - A new bucket's first request is reported at once, alone; the very
//     first bucket opens the stream and starts the report timer. Every
//     report interval (5 s, hard-coded in Envoy, which ignores the
//     per-bucket reporting_interval) every bucket is reported in one
//     report: the requests allowed and denied since its last report, and
//     the whole seconds since then. Every report carries the domain.
//   - assignment_time_to_live counts in whole seconds; unset or under a
//     second, it runs out at once. The bucket then falls back to its
//     expired fallback for the expired timeout's whole seconds (none, and
//     the fallback ends at once), then to its no-assignment behaviour.
//   - A token_bucket assignment identical to the cached one keeps the
//     bucket's token bucket as it is (tokens neither reset nor refilled);
//     only the time to live restarts. Identical means equal max_tokens,
//     tokens_per_fill and nanos of fill_interval: the seconds are not
//     compared. Any other token bucket is new: full when there was none
//     before (first assignment, or after a blanket rule, an expiry or an
//     abandon). Replacing a token bucket, Envoy computes the new max_tokens
//     × remaining / old max_tokens, truncated, but hands that count to a
//     constructor whose parameter is a bool: one or more starts the new
//     bucket full, zero starts it empty, never part full. The refill rate is tokens_per_fill over the whole
//     seconds of fill_interval, at least one token a year; under a second,
//     Envoy divides by zero and the bucket is unlimited.
//   - The actions of a response apply in order. abandon_action erases the
//     bucket with its usage not yet reported; an action for a bucket the
//     Envoy does not hold (never made, or abandoned) is dropped.
//   - A stream that ends, or that Disconnect drops, leaves the cached
//     actions to their time to live; new buckets' first reports are then
//     lost, and the next periodic report opens a new stream. Usage in a
//     report that does not go out is never sent again. Reports say nothing
//     of which Envoy sent them: the stream is the client.
//
// What it leaves out: the bucket matchers and the BucketId builder (a
// request is given its bucket id), deny response settings, preview
// matchers (keep_matching), reuse_last_assignment (which Envoy does not
// implement), the several worker threads and their races with the main
// one, and gRPC retries and backoff.
package rlqsenvoy
