// Package envoymodel reads Envoy configuration back the way Envoy does, for
// the tests: its own tests check the Envoy, Istio and Envoy Gateway files of
// the repository's envoy/ directory and the demo's compose file, and the
// integration tests drive the server with the descriptors Envoy would send.
//
// FromYAML and FromValue decode Envoy's YAML into its v3 API types, as
// envoy does with a bootstrap file; Validate applies the API's constraints,
// inside typed_config too; LoadBootstrap does all three for a file.
// HTTPListeners finds the HTTP listeners of a Bootstrap with their routes and
// rate limit filter, and HTTPListener.RateLimitRequest computes the request
// Envoy's rate limit filter sends to ratewarden for one HTTP request: the
// domain, and one descriptor per applicable rate_limits entry whose actions
// all produce an entry. Descriptors does the same for a list of rate_limits,
// such as an Istio EnvoyFilter patch carries.
//
// The model covers what ratewarden's configuration uses and says so when it
// meets anything else: the actions remote_address, request_headers,
// generic_key, header_value_match, source_cluster and destination_cluster;
// header matchers by presence or string_match; virtual hosts by domain,
// routes by prefix, path or headers. Descriptor values are literal, as
// Envoy's are unless its formatter runtime flag is on. Any other field that
// changes which descriptors are sent is an error, never silently ignored.
package envoymodel
