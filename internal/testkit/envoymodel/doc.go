// Package envoymodel reads Envoy configuration back the way Envoy does, for
// the tests: with it, the tests of test/ check the Envoy, Istio and Envoy
// Gateway files of the repository's envoy/ directory and the demo's compose
// file, and drive the server with the descriptors Envoy would send. Its own
// tests check the model on configuration they write themselves.
//
// FromYAML and FromValue decode Envoy's YAML into its v3 API types, as
// envoy does with a bootstrap file; Validate applies the API's constraints,
// inside typed_config too; LoadBootstrap does all three for a file.
// HTTPListeners finds the HTTP listeners of a Bootstrap with their routes and
// rate limit filter, and HTTPListener.RateLimitRequest computes the request
// Envoy's rate limit filter sends to ratewarden for one HTTP request: the
// domain, and one descriptor per applicable rate_limits entry whose actions
// all produce an entry. Descriptors does the same for a list of rate_limits,
// such as an Istio EnvoyFilter patch carries, and PerRouteDescriptors for
// the rate_limits of a route's per-filter configuration, as Envoy Gateway
// writes them, with their hits_addend, limit override and
// apply_on_stream_done. Describe writes descriptors down as "key=value" lists
// for the tests to compare.
//
// The model covers what ratewarden's configuration and Envoy Gateway's
// translator use, and says so when it meets anything else: the actions
// remote_address, request_headers, generic_key, header_value_match,
// query_parameters, query_parameter_value_match, remote_address_match,
// source_cluster and destination_cluster; header and query parameter
// matchers by presence or string_match; virtual hosts by domain, routes by
// prefix, path or headers. Descriptor values are literal, as Envoy's are
// unless its formatter runtime flag is on, but for remote_address_match,
// whose %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% is the client's address;
// the one format of hits_addend modelled is %DYNAMIC_METADATA(ns:key)%. Any
// other field that changes which descriptors are sent is an error, never
// silently ignored.
package envoymodel
