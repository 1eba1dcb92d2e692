package server

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/explain"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/tlstest"
)

// TestExplainEndpointTakesNothing: /explain answers as often as asked, and
// the limit it explains is untouched: all 5 logins a minute are still
// there, and the sixth is over.
func TestExplainEndpointTakesNothing(t *testing.T) {
	s := start(t, nil)
	plain := &http.Client{Timeout: 5 * time.Second}
	for range 10 {
		code, body := do(t, plain, http.MethodPost, s.http+"/explain", loginJSON(t, "192.0.2.80"))
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, "rule edge.path_/login.remote_address at ../../config/edge.yaml:40\n")
		assert.Contains(t, body, `limit 5 per 1 minute, sliding_window_log: take 1`)
		assert.Contains(t, body, "key ratewarden:{edge|path=/login|remote_address=192.0.2.80|sliding_window_log:60} (slot ")
	}
	for i := range 5 {
		resp, err := s.client.ShouldRateLimit(t.Context(), loginRequest("192.0.2.80"))
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "call %d", i)
		require.EqualValues(t, 4-i, resp.GetStatuses()[0].GetLimitRemaining(), "call %d", i)
	}
	resp, err := s.client.ShouldRateLimit(t.Context(), loginRequest("192.0.2.80"))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
}

func TestExplainEndpointAnswers(t *testing.T) {
	s := start(t, nil)
	plain := &http.Client{Timeout: 5 * time.Second}

	code, body := do(t, plain, http.MethodPost, s.http+"/explain?format=json", `{"domain":"edge","descriptors":[
		{"entries":[{"key":"api_key","value":"k1"}]},
		{"entries":[{"key":"user","value":"u"}]}]}`)
	require.Equal(t, http.StatusOK, code, body)
	var r explain.Report
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	assert.Equal(t, "memory", r.Backend)
	require.Len(t, r.Descriptors, 2)
	api := r.Descriptors[0]
	require.NotNil(t, api.Rule)
	assert.Equal(t, "edge.api_key", api.Rule.Path)
	require.Len(t, api.Limits, 2)
	assert.Equal(t, "token_bucket", api.Limits[0].Algorithm)
	assert.Equal(t, uint64(20), api.Limits[0].Burst)
	assert.Equal(t, []string{"ratewarden:{edge|api_key=k1|token_bucket:1}"}, api.Limits[0].Shards[0].Keys)
	assert.Equal(t, "edge|api_key=k1|token_bucket:1", api.Limits[0].Shards[0].HashTag)
	assert.True(t, strings.HasPrefix(api.Limits[1].Shards[0].Keys[0], "ratewarden:{edge|api_key=k1|fixed_window:86400}:w"))
	assert.Nil(t, r.Descriptors[1].Rule)
	assert.Contains(t, r.Descriptors[1].Why, `no descriptor of key "user"`)

	for _, tc := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{http.MethodGet, "/explain", "", http.StatusMethodNotAllowed, "takes POST"},
		{http.MethodPost, "/explain", "{", http.StatusBadRequest, "not a RateLimitRequest in JSON"},
		{http.MethodPost, "/explain", `{"domain":""}`, http.StatusBadRequest, "domain must not be empty"},
		{http.MethodPost, "/explain", `{"domain":"edge","descriptors":[{"entries":[{"key":"","value":"v"}]}]}`, http.StatusBadRequest, "empty key"},
		{http.MethodPost, "/explain?format=yaml", loginJSON(t, "192.0.2.81"), http.StatusBadRequest, `format "yaml"`},
	} {
		code, body := do(t, plain, tc.method, s.http+tc.path, tc.body)
		assert.Equal(t, tc.code, code, "%s %s %s: %s", tc.method, tc.path, tc.body, body)
		assert.Contains(t, body, tc.msg)
	}
}

// TestExplainEndpointOffAsJSONIs: /explain is off exactly where /json is.
func TestExplainEndpointOffAsJSONIs(t *testing.T) {
	plain := &http.Client{Timeout: 5 * time.Second}
	s := start(t, map[string]string{"RLS_HTTP_JSON": "off"})
	for _, path := range []string{"/json", "/explain"} {
		code, body := do(t, plain, http.MethodPost, s.http+path, loginJSON(t, "192.0.2.82"))
		assert.Equal(t, http.StatusForbidden, code, path)
		assert.Contains(t, body, "(RLS_HTTP_JSON=off)", path)
	}
	ca := tlstest.NewCA(t, "test CA")
	cert, key, caFile := tlstest.ServerFiles(t, t.TempDir(), ca, 100)
	s = start(t, map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile})
	code, body := do(t, plain, http.MethodPost, s.http+"/explain", loginJSON(t, "192.0.2.82"))
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "rls: /explain is off, as /json is: gRPC requires client certificates")
}

// TestExplainEndpointNamesTheRedisKeys: after one decision of a server
// counting in Redis, Redis holds the keys /explain named for it.
func TestExplainEndpointNamesTheRedisKeys(t *testing.T) {
	redis := redistest.Standalone(t)
	s := start(t, map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": redis.Addr(), "RLS_KEY_PREFIX": "explain:"})
	plain := &http.Client{Timeout: 5 * time.Second}
	for _, req := range []string{
		loginJSON(t, "192.0.2.83"),
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k|2"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"generic_key","value":"upstream"}]}]}`,
	} {
		code, body := do(t, plain, http.MethodPost, s.http+"/explain?format=json", req)
		require.Equal(t, http.StatusOK, code, body)
		var r explain.Report
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		code, body = do(t, plain, http.MethodPost, s.http+"/json", req)
		require.Equal(t, http.StatusOK, code, body)
		client := redis.Client(t)
		for _, l := range r.Descriptors[0].Limits {
			for _, k := range l.Shards[0].Keys {
				n, err := client.Exists(t.Context(), k).Result()
				require.NoError(t, err)
				assert.EqualValues(t, 1, n, "key %q", k)
			}
		}
	}
}

// TestExplainEndpointNamesFilesAsRLConfigDoes: under an absolute
// RLS_CONFIG_PATH, file names are relative to it, unless
// RLS_RLCONFIG_SHOW_PATHS.
func TestExplainEndpointNamesFilesAsRLConfigDoes(t *testing.T) {
	dir, err := filepath.Abs("../../config")
	require.NoError(t, err)
	plain := &http.Client{Timeout: 5 * time.Second}
	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir})
	_, body := do(t, plain, http.MethodPost, s.http+"/explain", loginJSON(t, "192.0.2.84"))
	assert.Contains(t, body, "rule edge.path_/login.remote_address at edge.yaml:40\n")
	assert.NotContains(t, body, dir)
	_, body = do(t, plain, http.MethodPost, s.http+"/explain", `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/search"}]}]}`)
	assert.Contains(t, body, "no rule: the descriptor at edge.yaml:47 ")

	s = start(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_RLCONFIG_SHOW_PATHS": "true"})
	_, body = do(t, plain, http.MethodPost, s.http+"/explain", loginJSON(t, "192.0.2.84"))
	assert.Contains(t, body, "rule edge.path_/login.remote_address at "+filepath.Join(dir, "edge.yaml")+":40\n")
}
