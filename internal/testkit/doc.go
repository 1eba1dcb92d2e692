// Package testkit is the folder of what ratewarden's tests and its load
// generator (the module in bench/) share, apart from the product: no
// package of the server imports anything under it
// (TestProductImportsNoTestkit checks). Its packages:
//
//   - proc starts and stops processes: redis-server (standalone, a cluster,
//     Sentinel) and the server binary.
//   - redistest adapts proc's Redis processes to tests.
//   - promtext reads a Prometheus /metrics page.
//   - envoymodel reads Envoy configuration back as Envoy does.
//   - algotest is the behavioural suite every backend runs, with a fake
//     clock.
//   - xdstest is an xDS management server, and what Envoy Gateway's
//     translator builds.
//   - tracingtest is an OTLP trace collector, and runs a test again in a
//     child process with the OTEL_* variables the SDK reads.
//   - tlstest makes a certificate authority for one test, and the
//     certificates and files of the servers and clients it signs.
//   - filehold makes reads of a file hang.
//   - rlstest builds the requests, limits and slow backends that the tests of
//     the rate limit service and its layers share.
//   - rlscripts holds curls of envoyproxy/ratelimit's integration scripts
//     that several tests play.
//   - exactness records what a server answered and holds it to the rules
//     of its algorithms: no hit past the limit, no false denial, the true
//     remaining.
//   - rlqsenvoy is a fake Envoy for the Rate Limit Quota Service: a model
//     of Envoy's rate_limit_quota filter as a client of an RLQS server.
package testkit
