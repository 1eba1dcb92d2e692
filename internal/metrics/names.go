package metrics

import "strings"

// Prefix starts the name of every metric of ratewarden's own, and RulePrefix
// the names of its per-rule counters.
const (
	Prefix     = "ratewarden_"
	RulePrefix = "ratewarden_rule_"
)

// The per-rule counters, each labelled domain, descriptor, limit, algorithm
// and window, with its help text beside it.
const (
	// RuleHits counts the hits asked of a limit.
	RuleHits     = "ratewarden_rule_hits_total"
	ruleHitsHelp = "Hits asked of a limit (envoyproxy/ratelimit's total_hits)."

	// RuleWithinLimitHits counts the hits a limit admitted.
	RuleWithinLimitHits     = "ratewarden_rule_within_limit_hits_total"
	ruleWithinLimitHitsHelp = "Hits a limit admitted (within_limit)."

	// RuleNearLimitHits counts the admitted hits that left a limit near full.
	RuleNearLimitHits     = "ratewarden_rule_near_limit_hits_total"
	ruleNearLimitHitsHelp = "Admitted hits that left a limit used at or above RLS_NEAR_LIMIT_RATIO of its capacity (near_limit)."

	// RuleOverLimitHits counts the hits a limit denied.
	RuleOverLimitHits     = "ratewarden_rule_over_limit_hits_total"
	ruleOverLimitHitsHelp = "Hits a limit denied, shadow mode or not (over_limit)."

	// RuleShadowModeHits counts the denied hits that shadow mode let through.
	RuleShadowModeHits     = "ratewarden_rule_shadow_mode_hits_total"
	ruleShadowModeHitsHelp = "Hits a limit denied that shadow mode let through (shadow_mode)."

	// RuleChargedHits counts the hits charged to a limit as usage already
	// spent.
	RuleChargedHits     = "ratewarden_rule_charged_hits_total"
	ruleChargedHitsHelp = "Hits charged to a limit as usage already spent, recorded within the limit or past it (over_limit counts those of charges that took it past)."
)

// The service's metrics, with the labels each has and its help text beside
// it.
const (
	// Requests counts ShouldRateLimit calls, labelled code and grpc_code.
	Requests     = "ratewarden_requests_total"
	requestsHelp = "ShouldRateLimit calls, over gRPC and /json, by overall code (UNKNOWN when the call failed) and gRPC code."

	// RequestDuration is the histogram of the time to answer a call.
	RequestDuration     = "ratewarden_request_duration_seconds"
	requestDurationHelp = "Time to answer a ShouldRateLimit call, from its decoded request to its response."

	// RequestsShed counts the requests shed before the backend, labelled
	// reason.
	RequestsShed     = "ratewarden_requests_shed_total"
	requestsShedHelp = "Requests answered with the failure mode without calling the backend, because they could not have been answered before their deadline, by reason: deadline (too little time left for the backend's recent latency) or queue (the waiting list was full)."

	// DenyCacheHits counts the takes the deny cache denied.
	DenyCacheHits     = "ratewarden_deny_cache_hits_total"
	denyCacheHitsHelp = "Takes denied from the deny cache, without asking the backend."
)

// The backend's metrics, with the labels each has and its help text beside
// it.
const (
	// BackendDuration is the histogram of the time of one backend call.
	BackendDuration     = "ratewarden_backend_duration_seconds"
	backendDurationHelp = "Time of one call to the backend (one pipelined round trip to Redis), failed or not; calls the circuit breaker refused are not included."

	// BackendErrors counts the backend calls that failed, labelled kind.
	BackendErrors     = "ratewarden_backend_errors_total"
	backendErrorsHelp = "Backend calls that failed, by kind: timeout, unavailable (connection refused, reset or closed), circuit_open (refused by the circuit breaker without trying), other."

	// BreakerState is the circuit breaker's state, labelled state.
	BreakerState     = "ratewarden_backend_circuit_breaker_state"
	breakerStateHelp = "1 for the circuit breaker's current state (closed, open or half_open), 0 for the others."

	// BreakerOpened counts the times the circuit breaker opened.
	BreakerOpened     = "ratewarden_backend_circuit_breaker_opened_total"
	breakerOpenedHelp = "Times the circuit breaker opened, after consecutive failures or a failed probe."

	// InflightLimit is how many requests may have backend calls under way.
	InflightLimit     = "ratewarden_backend_inflight_limit"
	inflightLimitHelp = "How many requests may have backend calls under way at once: RLS_MAX_INFLIGHT, or the limit adapted to what the backend answers in time."

	// GiveBacks counts the give-backs owed to the backend, one per limit
	// of a failed call whatever its hits, labelled result.
	GiveBacks     = "ratewarden_backend_give_backs_total"
	giveBacksHelp = "Give-backs owed to the backend after a failed call, one per limit whatever its hits, by result: given_back, dropped (queue full or time limit passed), uncertain (a take answered with the failure mode, or a refund, that may or may not have run and is not sent again)."

	// BackendHealth is what the last health check of the backend found,
	// labelled state.
	BackendHealth     = "ratewarden_backend_health"
	backendHealthHelp = "1 for what the last health check of the backend found, 0 for the others: ok, unreachable (no answer, or an error such as a refused connection or a wrong password), refuses_writes (Redis answers but would refuse the scripts' writes: OOM, READONLY, MISCONF, NOREPLICAS)."

	// DeferredCharges counts the charges recorded after their request,
	// labelled result.
	DeferredCharges     = "ratewarden_backend_deferred_charges_total"
	deferredChargesHelp = "Charges (usage already spent) that could not be recorded with their request (shed, circuit breaker open, or a backend call that failed before running them), by result: recorded later, dropped (queue full or time limit passed), uncertain (sent, and may or may not have run: not sent again)."
)

// The metrics of the leases of hot limits (RLS_LEASES), labelled domain,
// descriptor and algorithm, with their help text beside them.
const (
	// LeaseTaken counts the leases taken from Redis.
	LeaseTaken     = "ratewarden_lease_taken_total"
	leaseTakenHelp = "Leases taken from Redis for a limit this replica asks often (RLS_LEASES)."

	// LeaseHits counts the hits of leases, labelled result too.
	LeaseHits     = "ratewarden_lease_hits_total"
	leaseHitsHelp = "Hits of leases, by result: leased (reserved in Redis by a lease), served (admitted from a lease without asking Redis), given_back (not used, and given back)."
)

// The metrics of the Rate Limit Quota Service (RLS_RLQS), labelled domain,
// descriptor and algorithm, with their help text beside them.
const (
	// RLQSGrants counts the grants made to Envoys.
	RLQSGrants     = "ratewarden_rlqs_grants_total"
	rlqsGrantsHelp = "Grants made to Envoys' rate_limit_quota filters: token buckets of hits reserved on a limit (RLS_RLQS)."

	// RLQSGrantedHits counts the hits of the grants.
	RLQSGrantedHits     = "ratewarden_rlqs_granted_hits_total"
	rlqsGrantedHitsHelp = "Hits reserved by the grants made to Envoys (RLS_RLQS)."

	// RLQSReported counts the requests Envoys reported, labelled result
	// too.
	RLQSReported     = "ratewarden_rlqs_reported_requests_total"
	rlqsReportedHelp = "Requests Envoys reported of their buckets, by result: allowed or denied (RLS_RLQS)."

	// RLQSUngranted counts the requests Envoys reported allowed beyond
	// their grants.
	RLQSUngranted     = "ratewarden_rlqs_ungranted_requests_total"
	rlqsUngrantedHelp = "Requests Envoys reported allowed beyond their grants: admitted by the filter's own fallback (ALLOW_ALL with no assignment, or once one expired), and recorded as usage after the fact (RLS_RLQS)."

	// RLQSGrantsShort counts the grants asked of a limit that had less
	// room than asked.
	RLQSGrantsShort     = "ratewarden_rlqs_grants_short_total"
	rlqsGrantsShortHelp = "Grants asked of a limit that had less room than asked: cut to the room there was, or not made (RLS_RLQS)."

	// RLQSStreams is the Envoys' streams open.
	RLQSStreams     = "ratewarden_rlqs_streams"
	rlqsStreamsHelp = "Streams of Envoys' rate_limit_quota filters open on this replica (RLS_RLQS)."
)

// The metrics of the limits configuration, with the labels each has and its
// help text beside it.
const (
	// ConfigReloads counts the reloads of the limits, labelled result.
	ConfigReloads     = "ratewarden_config_reloads_total"
	configReloadsHelp = "Reloads of the limits configuration, by result: success or failure (the previous configuration stays in force)."

	// ConfigLastReloadSuccessful is 1 when the last reload succeeded.
	ConfigLastReloadSuccessful     = "ratewarden_config_last_reload_successful"
	configLastReloadSuccessfulHelp = "1 when the last reload of the limits configuration succeeded (or none was tried), 0 when it failed."

	// ConfigLoaded is 1 once limits are in force.
	ConfigLoaded     = "ratewarden_config_loaded"
	configLoadedHelp = "1 once limits are in force, 0 while none has been loaded (files not there yet, an xDS server that has not answered): every request is then answered with gRPC Unknown \"no rate limit configuration loaded\"."

	// XDSConnected is 1 while the stream to the xDS server is up.
	XDSConnected     = "ratewarden_xds_connected"
	xdsConnectedHelp = "1 while the stream to the xDS management server is open and has answered, else 0."
)

// RatelimitPrefix starts the name of every metric of envoyproxy/ratelimit's
// that ratewarden exports (RLS_METRICS_NAMES ratelimit or both), and
// RatelimitRulePrefix the names of its per-rule counters.
const (
	RatelimitPrefix     = "ratelimit_service_"
	RatelimitRulePrefix = "ratelimit_service_rate_limit_"
)

// envoyproxy/ratelimit's per-rule counters, labelled domain, key1 and, for a
// rule below the first level, key2. Their help text is ratelimitRuleHelp's.
const (
	// RatelimitTotalHits counts the hits asked of a rule.
	RatelimitTotalHits = "ratelimit_service_rate_limit_total_hits"
	// RatelimitOverLimit counts the hits a rule denied.
	RatelimitOverLimit = "ratelimit_service_rate_limit_over_limit"
	// RatelimitNearLimit counts the admitted hits at or above the near-limit
	// ratio.
	RatelimitNearLimit = "ratelimit_service_rate_limit_near_limit"
	// RatelimitWithinLimit counts the hits a rule admitted.
	RatelimitWithinLimit = "ratelimit_service_rate_limit_within_limit"
	// RatelimitShadowMode counts the denied hits that shadow mode let through.
	RatelimitShadowMode = "ratelimit_service_rate_limit_shadow_mode"
)

// ratelimitRuleHelp returns the help text of envoyproxy/ratelimit's per-rule
// counter name: its stat, as that project names it, in its stat name.
func ratelimitRuleHelp(name string) string {
	return "Hits of a rule: envoyproxy/ratelimit's ratelimit.service.rate_limit.<domain>.<descriptor>." +
		strings.TrimPrefix(name, RatelimitRulePrefix) + "."
}

// envoyproxy/ratelimit's other metrics, with the labels each has and its help
// text beside it.
const (
	// RatelimitTotalRequests counts ShouldRateLimit calls, labelled
	// grpc_method.
	RatelimitTotalRequests     = "ratelimit_service_total_requests"
	ratelimitTotalRequestsHelp = "ShouldRateLimit calls, over gRPC and /json (envoyproxy/ratelimit's ratelimit_server.<method>.total_requests)."

	// RatelimitResponseTime is the histogram of the time to answer a call,
	// labelled grpc_method.
	RatelimitResponseTime     = "ratelimit_service_response_time_seconds"
	ratelimitResponseTimeHelp = "Time to answer a ShouldRateLimit call (envoyproxy/ratelimit's ratelimit_server.<method>.response_time)."

	// RatelimitShouldRateLimitError counts the calls that failed, labelled
	// err_type.
	RatelimitShouldRateLimitError     = "ratelimit_service_should_rate_limit_error"
	ratelimitShouldRateLimitErrorHelp = "ShouldRateLimit calls that failed: redis_error when the backend failed and the answer was UNAVAILABLE, service_error when the request was invalid."

	// RatelimitConfigLoadSuccess counts the loads of the limits that
	// succeeded.
	RatelimitConfigLoadSuccess     = "ratelimit_service_config_load_success"
	ratelimitConfigLoadSuccessHelp = "Loads of the limits configuration that succeeded, the first one included."

	// RatelimitConfigLoadError counts the loads of the limits that failed.
	RatelimitConfigLoadError     = "ratelimit_service_config_load_error"
	ratelimitConfigLoadErrorHelp = "Loads of the limits configuration that failed; the previous configuration stays in force."
)
