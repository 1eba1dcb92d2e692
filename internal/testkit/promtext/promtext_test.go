package promtext

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `# HELP example_requests_total Requests.
# TYPE example_requests_total counter
example_requests_total{code="OK",domain="edge"} 12

example_decision_seconds_bucket{le="+Inf"} 3
example_label_with_space{v="a b"} 1.5e-06
up 1
`

func TestParse(t *testing.T) {
	got, err := Parse(sample)
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{
		`example_requests_total{code="OK",domain="edge"}`: 12,
		`example_decision_seconds_bucket{le="+Inf"}`:      3,
		`example_label_with_space{v="a b"}`:               1.5e-06,
		`up`:                                              1,
	}, got)

	for _, bad := range []string{"novalue\n", "name notanumber\n"} {
		_, err := Parse(bad)
		assert.ErrorContains(t, err, "sample line", "%q", bad)
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, sample)
	}))
	defer srv.Close()
	got, err := Scrape(srv.URL + "/metrics")
	require.NoError(t, err)
	assert.Equal(t, 12.0, got[`example_requests_total{code="OK",domain="edge"}`])

	_, err = Scrape(srv.URL + "/other")
	assert.ErrorContains(t, err, "404")
}
