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

// TestJSONLoneSurrogate: a \u escape of half a UTF-16 surrogate pair, which
// no UTF-8 string can hold, is refused with an error that quotes that
// escape and says where it is, whatever follows it.
func TestJSONLoneSurrogate(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte("domain: test\n")}}, defaultConfigOptions(t))
	require.NoError(t, err)
	h := newEndpoints(t, cfg)
	for _, tc := range []struct{ name, body, want string }{
		{"a high surrogate ending the string", `{"domain":"\ud800"}`, `line 1:12: invalid escape "\ud800" in string: half a UTF-16 surrogate pair`},
		{"a high surrogate followed by text", `{"domain":"test","descriptors":[{"entries":[{"key":"k","value":"\ud800x"}]}]}`, `line 1:65: invalid escape "\ud800" in string: half a UTF-16 surrogate pair`},
		{"a high surrogate followed by another escape", `{"domain":"a\uD800\n"}`, `line 1:13: invalid escape "\uD800" in string`},
		{"a high surrogate followed by a high surrogate", `{"domain":"\ud800\ud800"}`, `line 1:12: invalid escape "\ud800" in string`},
		{"a lone low surrogate", "{\n  \"domain\": \"\\udc00\"\n}", `line 2:14: invalid escape "\udc00" in string: half a UTF-16 surrogate pair`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(tc.body)))
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			body, err := io.ReadAll(rec.Body)
			require.NoError(t, err)
			assert.Contains(t, string(body), tc.want)
		})
	}

	t.Run("a pair and an escaped backslash are no surrogates", func(t *testing.T) {
		rec := httptest.NewRecorder()
		body := `{"domain":"test","descriptors":[{"entries":[{"key":"k","value":"\ud83d\ude00 \\ud800"}]}]}`
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(body)))
		assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	})
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
