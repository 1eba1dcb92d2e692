package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// newEndpoints returns the HTTP endpoints of a service on a memory backend
// under limits, which may be nil: no configuration loaded.
func newEndpoints(t *testing.T, limits *config.Config) http.Handler {
	t.Helper()
	mem := memory.New()
	t.Cleanup(mem.Close)
	svc, err := rls.New(mem, limits, defaultServiceOptions(t))
	require.NoError(t, err)
	return newHTTPHandler(svc, NewHealth(), httpOptions{})
}

// TestJSONRefusesWhatIsNotARequest: a body that rls.ParseRequestJSON
// refuses is answered 400 with its error, which says where it is wrong.
func TestJSONRefusesWhatIsNotARequest(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte("domain: test\n")}}, defaultConfigOptions(t))
	require.NoError(t, err)
	h := newEndpoints(t, cfg)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(`{"domain":"\ud800"}`)))
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	assert.Equal(t, "rls: request is not a RateLimitRequest in JSON: "+
		`line 1:12: invalid escape "\ud800" in string: half a UTF-16 surrogate pair, which a UTF-8 string cannot hold`+"\n", string(body))

}

// TestJSONWithoutConfig: until a configuration is loaded, /json says 503
// with the reason, as ShouldRateLimit answers every valid request with
// rls.ErrNoConfig.
func TestJSONWithoutConfig(t *testing.T) {
	rec := httptest.NewRecorder()
	newEndpoints(t, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json",
		strings.NewReader(`{"domain":"test","descriptors":[{"entries":[{"key":"fixed","value":"a"}]}]}`)))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "no rate limit configuration loaded")
}
