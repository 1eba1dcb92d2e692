package redisx

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// backend is one Redis deployment the tests run against.
type backend struct {
	name string
	// client returns a new client of the deployment, closed when t ends.
	client func(t *testing.T) redis.UniversalClient
	// masters returns a client per master node, closed when t ends.
	masters func(t *testing.T) []*redis.Client
}

// backends returns the shared standalone server and the shared cluster.
func backends() []backend {
	return []backend{
		{
			name:   "standalone",
			client: func(t *testing.T) redis.UniversalClient { return redistest.SharedStandalone(t).Client(t) },
			masters: func(t *testing.T) []*redis.Client {
				return []*redis.Client{redistest.SharedStandalone(t).Client(t)}
			},
		},
		{
			name:   "cluster",
			client: func(t *testing.T) redis.UniversalClient { return redistest.SharedCluster(t).Client(t) },
			masters: func(t *testing.T) []*redis.Client {
				var cs []*redis.Client
				for _, m := range redistest.SharedCluster(t).Masters(t) {
					cs = append(cs, m.Client(t))
				}
				return cs
			},
		},
	}
}

// testPipelines is how many pipelines the tests' Limiters keep in flight,
// unless a test says otherwise.
const testPipelines = 2

var prefixes atomic.Int64

// testPrefix returns a key prefix that no other test, nor an earlier run of
// this one against the same server, uses.
func testPrefix(t *testing.T) string {
	name := strings.NewReplacer("{", "(", "}", ")").Replace(t.Name())
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	return "redisx-test:" + run + ":" + strconv.FormatInt(prefixes.Add(1), 10) + ":" + name + ":"
}
