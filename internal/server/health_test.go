package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/redisx"
)

// flakyBackend is a memory backend whose Ping fails while down is set,
// hangs until its context ends while hang is set, or answers with a refusal
// of writes while refuse is set.
type flakyBackend struct {
	memoryBackend
	down, hang, refuse atomic.Bool
	pings              atomic.Int64
	prepares           atomic.Int64
}

func (b *flakyBackend) Prepare(context.Context) error {
	b.prepares.Add(1)
	return nil
}

func (b *flakyBackend) CheckWrites(ctx context.Context) error {
	b.pings.Add(1)
	if b.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if b.down.Load() {
		return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	if b.refuse.Load() {
		return fmt.Errorf("%w: OOM command not allowed when used memory > 'maxmemory'", redisx.ErrWritesRefused)
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBackendWatchFollowsTheBackend(t *testing.T) {
	mem := memory.New()
	b := &flakyBackend{memoryBackend: memoryBackend{mem}}
	t.Cleanup(mem.Close)
	h := NewHealth()
	h.SetConfigLoaded(true)
	var logs syncBuffer
	w := &backendWatch{backend: b, health: h, interval: 5 * time.Millisecond, timeout: 20 * time.Millisecond,
		log: slog.New(slog.NewTextHandler(&logs, nil))}

	serving := func() bool { ok, _ := h.Ready(); return ok }
	w.check(context.Background())
	require.True(t, serving())

	stop := w.start()
	defer stop()
	b.down.Store(true)
	require.Eventually(t, func() bool { return !serving() }, 2*time.Second, time.Millisecond)
	_, why := h.Ready()
	assert.Contains(t, why, "backend unreachable: dial tcp")
	b.down.Store(false)
	require.Eventually(t, serving, 2*time.Second, time.Millisecond)

	// A backend that hangs is unreachable too: the ping's timeout ends it.
	b.hang.Store(true)
	require.Eventually(t, func() bool { return !serving() }, 2*time.Second, time.Millisecond)
	_, why = h.Ready()
	assert.Contains(t, why, "deadline exceeded")
	b.hang.Store(false)
	require.Eventually(t, serving, 2*time.Second, time.Millisecond)

	stop()
	n := b.pings.Load()
	time.Sleep(30 * time.Millisecond) // six intervals: a running watch would ping
	assert.Equal(t, n, b.pings.Load(), "stop ends the pings")

	// The backend was prepared when first seen and after each return.
	assert.EqualValues(t, 3, b.prepares.Load())

	// Each change is logged once, not each failed ping.
	assert.Equal(t, 2, bytes.Count([]byte(logs.String()), []byte("backend not ready")), logs.String())
	assert.Equal(t, 2, bytes.Count([]byte(logs.String()), []byte("backend ready again")), logs.String())
}

// TestLivenessWaitsForTheBackend: a backend that is down when the watch
// starts keeps liveness failing, with its error, and logs once; its first
// answer makes the process live for good, even an answer that refuses
// writes, which readiness still reports.
func TestLivenessWaitsForTheBackend(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		mem := memory.New()
		t.Cleanup(mem.Close)
		b := &flakyBackend{memoryBackend: memoryBackend{mem}}
		b.down.Store(true)
		h := NewHealth()
		h.SetConfigLoaded(true)
		var logs syncBuffer
		w := &backendWatch{backend: b, health: h, interval: time.Hour, timeout: 20 * time.Millisecond,
			log: slog.New(slog.NewTextHandler(&logs, nil))}

		for range 3 {
			w.check(context.Background())
			live, why := h.Live()
			require.False(t, live)
			assert.Contains(t, why, "waiting for the backend's first answer: backend unreachable: dial tcp")
		}
		assert.Equal(t, 1, strings.Count(logs.String(), "backend has not answered yet"), logs.String())

		b.down.Store(false)
		b.refuse.Store(refuse)
		w.check(context.Background())
		live, _ := h.Live()
		assert.True(t, live, "refuse=%v: the backend answered", refuse)
		ready, why := h.Ready()
		assert.Equal(t, !refuse, ready, why)
		if refuse {
			assert.Contains(t, why, "backend refuses writes: redisx: Redis refuses writes: OOM")
		}

		b.refuse.Store(false)
		b.down.Store(true)
		w.check(context.Background())
		live, _ = h.Live()
		assert.True(t, live, "refuse=%v: an outage after the first answer leaves liveness alone", refuse)
		ready, _ = h.Ready()
		assert.False(t, ready)
	}
}

// TestBackendWatchReportsWhatItFinds: each check tells the metrics what it
// found, a refusal of writes apart from a backend that does not answer.
func TestBackendWatchReportsWhatItFinds(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	b := &flakyBackend{memoryBackend: memoryBackend{mem}}
	var found []metrics.BackendCheck
	w := &backendWatch{backend: b, health: NewHealth(), interval: time.Hour, timeout: 20 * time.Millisecond,
		log: slog.New(slog.DiscardHandler), observe: func(c metrics.BackendCheck) { found = append(found, c) }}

	w.check(context.Background())
	b.refuse.Store(true)
	w.check(context.Background())
	b.down.Store(true)
	w.check(context.Background())
	b.down.Store(false)
	b.refuse.Store(false)
	w.check(context.Background())
	assert.Equal(t, []metrics.BackendCheck{metrics.BackendOK, metrics.BackendRefusesWrites, metrics.BackendUnreachable, metrics.BackendOK}, found)
}

func TestRedisLogsGoToDebug(t *testing.T) {
	var out syncBuffer
	redisLogger{slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))}.
		Printf(context.Background(), "redis: connection pool: %s", "failed to dial")
	assert.Empty(t, out.String(), "not at info level")
	redisLogger{slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))}.
		Printf(context.Background(), "redis: connection pool: %s", "failed to dial")
	assert.Contains(t, out.String(), `level=DEBUG msg="redis: connection pool: failed to dial" component=go-redis`)
}

// TestBreakerCanBeTurnedOff: RLS_BREAKER_FAILURES=0 disables the breaker.
func TestBreakerCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(map[string]string{"RLS_BREAKER_FAILURES": "0"})
	require.NoError(t, err)
	assert.Zero(t, s.BreakerOptions().Failures)
}

// grpcStatus returns what grpc.health.v1 says for the server as a whole.
func grpcStatus(t *testing.T, h *Health) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := h.Server().Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	return resp.GetStatus()
}

// TestLivenessWaitsForTheBackendsFirstAnswer: a new Health is not live
// until the backend has answered once, naming the backend's error while it
// has not; from then on a backend outage fails readiness alone, and only a
// shutdown fails liveness.
func TestLivenessWaitsForTheBackendsFirstAnswer(t *testing.T) {
	h := NewHealth()
	h.SetConfigLoaded(true)
	live, why := h.Live()
	assert.False(t, live)
	assert.Equal(t, "waiting for the backend's first answer", why)

	h.SetBackendError(errors.New("backend unreachable: connection refused"))
	live, why = h.Live()
	assert.False(t, live)
	assert.Equal(t, "waiting for the backend's first answer: backend unreachable: connection refused", why)
	ready, why := h.Ready()
	assert.False(t, ready)
	assert.Equal(t, "waiting for the backend's first answer: backend unreachable: connection refused", why, "the backend's error once")
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, grpcStatus(t, h))

	h.SetBackendError(nil)
	h.BackendAnswered()
	live, _ = h.Live()
	assert.True(t, live)
	ready, _ = h.Ready()
	assert.True(t, ready)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, grpcStatus(t, h))

	h.SetBackendError(errors.New("backend unreachable: connection refused"))
	live, _ = h.Live()
	assert.True(t, live, "a later outage is not cured by a restart")
	ready, why = h.Ready()
	assert.False(t, ready)
	assert.Equal(t, "backend unreachable: connection refused", why)

	h.Shutdown()
	live, why = h.Live()
	assert.False(t, live)
	assert.Equal(t, "shutting down", why)
}
