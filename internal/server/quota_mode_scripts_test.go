// The integration scripts that need all of quota_mode: its rule for the
// overall code (a request is OVER_LIMIT only when every quota descriptor of
// it is over) and the descriptor metadata of envoyproxy/ratelimit's example
// configuration, each on a service of its own. TestRunAllScripts runs them
// with the others on one service, as run-all.sh does.

package server

import (
	"os"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
)

// exampleLimits returns envoyproxy/ratelimit's example configuration,
// unchanged.
func exampleLimits(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/envoyproxy-example.yaml")
	require.NoError(t, err)
	return data
}

func TestTokenQuotaScriptWithTheExampleConfig(t *testing.T) {
	for _, b := range scriptBackends {
		t.Run(b.name, func(t *testing.T) {
			tokenQuota(t, newScriptEnv(t, b, exampleLimits(t)), false)
		})
	}
}

// serviceHit is a descriptor of the /quota route, which sets no
// hits_addend: one hit.
func serviceHit(name string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "service", Value: name}}}
}

// TestQuotaScript: /quota takes one hit of (service, service_1), 1 a
// minute, and of (service, service_2), 2 a minute, both quota_mode. Worked
// through by hand (counts of service_1 and service_2 after each request):
//
//	request 1: 1 OK, 1 OK          → OK
//	request 2: 2 OVER, 2 OK        → OK: not every quota descriptor is over
//	request 3: 3 OVER, 3 OVER      → OVER_LIMIT
//	60 seconds later, the windows start again at 0
//	request 4: 1 OK, 1 OK          → OK
func TestQuotaScript(t *testing.T) {
	for _, b := range scriptBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newScriptEnv(t, b, exampleLimits(t))
			for i, want := range []rlsv3.RateLimitResponse_Code{codeOK, codeOK, codeOver} {
				resp := e.call(t, serviceHit("service_1"), serviceHit("service_2"))
				require.Equal(t, want, resp.GetOverallCode(), "request %d", i+1)
			}
			e.clock.Advance(time.Minute)
			resp := e.call(t, serviceHit("service_1"), serviceHit("service_2"))
			require.Equal(t, codeOK, resp.GetOverallCode(), "request 4: the quota buckets are refreshed")
		})
	}
}

// TestMultiserviceTokenQuotaScript: /multiservice-tokenquota checks
// (service, service_1) and (service, service_2) with hits_addend 0; Envoy
// sends the request to the service named by the metadata of the first
// descriptor within its limit, and charges that service 1 on stream done.
// Worked through by hand (counts of service_1 and service_2 after the
// stream-done charge):
//
//	request 1: both OK → service_1;           1, 0
//	request 2: both OK → service_1;           2 (OVER_LIMIT), 0
//	request 3: service_1 over → service_2;    2, 1
//	request 4: service_1 over → service_2;    2, 2
//	request 5: service_1 over → service_2;    2, 3 (OVER_LIMIT)
//	request 6: both over → 429, no upstream, no stream-done charge
//	60 seconds later, the windows start again at 0, as envoyproxy/ratelimit's
//	request 7: both OK → service_1
func TestMultiserviceTokenQuotaScript(t *testing.T) {
	for _, b := range scriptBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newScriptEnv(t, b, exampleLimits(t))
			// route returns the service Envoy sends the request to, or ""
			// for a 429, and charges it on stream done.
			route := func(t *testing.T) string {
				t.Helper()
				resp := e.call(t, service("service_1", 0), service("service_2", 0))
				if resp.GetOverallCode() == codeOver {
					return ""
				}
				served := ""
				for i, name := range []string{"service_1", "service_2"} {
					if resp.GetStatuses()[i].GetCode() == codeOK {
						served = name
						break
					}
				}
				require.NotEmpty(t, served, "an OK answer has a descriptor within its limit")
				e.call(t, service(served, 1))
				return served
			}
			for i, want := range []string{"service_1", "service_1", "service_2", "service_2", "service_2", ""} {
				require.Equal(t, want, route(t), "request %d", i+1)
			}
			e.clock.Advance(time.Minute)
			require.Equal(t, "service_1", route(t), "request 7: the quota buckets are refreshed and service_1 is used")
		})
	}
}
