package explain

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// FuzzRequest: whatever the body, Request answers with a report or with
// one of its errors (a body that is not a RateLimitRequest in JSON, or a
// request the service refuses), never a panic; and a report's text and
// every key of it are there.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/login"},{"key":"remote_address","value":"192.0.2.1"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k"}],"hitsAddend":"30"}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"x","value":"y"}],"limit":{"requestsPerUnit":3,"unit":"HOUR","unitMultiplier":2}}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"generic_key","value":"upstream"}],"isNegativeHits":true,"hitsAddend":5}],"hitsAddend":0}`,
		`{"domain":"internal","descriptors":[{"entries":[{"key":"client","value":"batch"}]},{"entries":[{"key":"client","value":"healthcheck"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.1.\u0000{}|=%"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[]}]}`,
		`{"domain":"","descriptors":[]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"\ud800"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"k"}],"limit":{"requestsPerUnit":4294967295,"unit":"YEAR","unitMultiplier":4294967295}}]}`,
		`[]`, `null`, `{`, ``, `{"unknown":1}`,
	} {
		f.Add([]byte(seed))
	}
	s, err := loadSettings(map[string]string{"RLS_CONFIG_PATH": "../../config"})
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := config.LoadContext(f.Context(), s.ConfigPath, s.ConfigOptions())
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Request(cfg, body, s, now)
		if err != nil {
			if !errors.Is(err, rls.ErrNotRequestJSON) && status.Code(err) != codes.InvalidArgument && !errors.Is(err, rls.ErrNoConfig) {
				t.Fatalf("unexpected error %T %v", err, err)
			}
			return
		}
		if r.Text() == "" {
			t.Fatal("an empty report")
		}
		for _, d := range r.Descriptors {
			for _, l := range d.Limits {
				if len(l.Shards) == 0 || len(l.Shards[0].Keys) == 0 {
					t.Fatalf("a limit without keys: %+v", l)
				}
			}
		}
	})
}
