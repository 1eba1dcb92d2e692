package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// tick is how often tests poll for what they wait for.
const tick = 5 * time.Millisecond

// reloadYAML is domain "reload" allowing rpu hits a minute per value of k.
func reloadYAML(rpu int) string {
	return fmt.Sprintf("domain: reload\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: %d, algorithm: fixed_window}\n", rpu)
}

func reloadRequest(value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{
		Domain: "reload",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: value}},
		}},
	}
}

// limitOf asks for one hit of k=value and returns the limit that answered.
func limitOf(ctx context.Context, c rlsv3.RateLimitServiceClient, value string) (uint32, error) {
	resp, err := c.ShouldRateLimit(ctx, reloadRequest(value))
	if err != nil {
		return 0, err
	}
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		return 0, fmt.Errorf("k=%s: %s", value, resp.GetOverallCode())
	}
	return resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), nil
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// outcomes collects what OnConfigReload reports.
type outcomes struct {
	mu   sync.Mutex
	errs []error
}

func (o *outcomes) add(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

func (o *outcomes) all() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs...)
}

func TestConfigReloadChangesAnswersWithoutFailingARequest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reload.yaml")
	require.NoError(t, writeFile(path, reloadYAML(1000)))
	// Polling off: the change must come through file notifications.
	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_POLL_INTERVAL": "0s"})
	reloads := &outcomes{}
	s.srv.OnConfigReload(reloads.add)
	ctx := context.Background()

	// Callers keep asking throughout the reload; each asks about a value
	// of its own, so no limit runs out.
	var calls, failures atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rpu, err := limitOf(ctx, s.client, fmt.Sprintf("bg-%d-%d", g, i))
				calls.Add(1)
				if err == nil && rpu != 1000 && rpu != 7 {
					err = fmt.Errorf("answered with a limit of %d", rpu)
				}
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	require.Eventually(t, func() bool { return calls.Load() > 100 }, 5*time.Second, tick)

	rpu, err := limitOf(ctx, s.client, "probe")
	require.NoError(t, err)
	require.EqualValues(t, 1000, rpu)

	// Rewritten in place, as `cp` does.
	changed := time.Now()
	require.NoError(t, writeFile(path, reloadYAML(7)))
	n := 0
	require.Eventually(t, func() bool {
		n++
		rpu, err := limitOf(ctx, s.client, fmt.Sprintf("probe-%d", n))
		return err == nil && rpu == 7
	}, 2*time.Second, 10*time.Millisecond, "the new limit is not in force within 2 s")
	t.Logf("new limit in force after %v", time.Since(changed).Round(time.Millisecond))

	before := calls.Load()
	require.Eventually(t, func() bool { return calls.Load() > before+100 }, 5*time.Second, tick)
	close(stop)
	wg.Wait()
	assert.Zero(t, failures.Load(), "of %d calls; the first: %v", calls.Load(), firstFailure.Load())

	require.NotEmpty(t, reloads.all())
	assert.NoError(t, reloads.all()[len(reloads.all())-1])
	code, body := getBody(t, s.http+"/rlconfig")
	assert.Equal(t, http.StatusOK, code)
	assert.Regexp(t, `^loaded: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ from `+regexp.QuoteMeta(filepath.Base(dir))+` \(1 file\)\n\n`, body)
	assert.Contains(t, body, "requests_per_unit=7 ")
	assert.NotContains(t, body, "last reload error")
}

func TestConfigReloadFailureKeepsTheLimitsInForce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "a.yaml"), reloadYAML(3)))
	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir})
	reloads := &outcomes{}
	s.srv.OnConfigReload(reloads.add)
	ctx := context.Background()

	bad := filepath.Join(dir, "b.yaml")
	require.NoError(t, writeFile(bad, "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"))
	require.Eventually(t, func() bool { return len(reloads.all()) == 1 }, 2*time.Second, tick)
	err := reloads.all()[0]
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad+":4:24: descriptors[0].rate_limit.unit: ")

	rpu, err := limitOf(ctx, s.client, "v")
	require.NoError(t, err)
	assert.EqualValues(t, 3, rpu, "the previous limits stay in force")
	code, body := getBody(t, s.http+"/rlconfig")
	assert.Equal(t, http.StatusOK, code)
	assert.Regexp(t, `^loaded: \S+ from `+regexp.QuoteMeta(filepath.Base(dir))+` \(1 file\)\nlast reload error: \S+Z: `+regexp.QuoteMeta(filepath.Base(bad))+`:4:24: descriptors\[0\]\.rate_limit\.unit: `, body)
	assert.Contains(t, body, "requests_per_unit=3 ")
	code, _ = getBody(t, s.http+"/healthcheck")
	assert.Equal(t, http.StatusOK, code, "a failed reload leaves the server serving")

	require.NoError(t, writeFile(bad, "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"))
	require.Eventually(t, func() bool { return len(reloads.all()) == 2 }, 2*time.Second, tick)
	assert.NoError(t, reloads.all()[1])
	_, body = getBody(t, s.http+"/rlconfig")
	assert.Regexp(t, `^loaded: \S+ from `+regexp.QuoteMeta(filepath.Base(dir))+` \(2 files\)\n\n`, body)
	assert.Contains(t, body, `domain "other"`)
}

func TestConfigWatchOff(t *testing.T) {
	s := start(t, map[string]string{"RLS_CONFIG_WATCH": "false"})
	_, watching := s.srv.config.source.(*config.Watcher)
	assert.False(t, watching)
	_, body := getBody(t, s.http+"/rlconfig")
	assert.Regexp(t, `^loaded: \S+ from \.\./\.\./config \(2 files\)\n\n`, body)
}

func TestConfigStateReloaded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	require.NoError(t, writeFile(path, reloadYAML(3)))
	first, err := config.LoadContext(context.Background(), path, defaultConfigOptions(t))
	require.NoError(t, err)
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	svc, err := rls.New(memory.New(), first, defaultServiceOptions(t))
	require.NoError(t, err)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	c := newConfigState(svc, config.NewStatic(config.Origin{Name: path}, first), first, t0, logger)
	reloads := &outcomes{}
	c.onReload(reloads.add)
	assert.Equal(t, ConfigStatus{Config: first, Source: path, LoadedAt: t0}, c.Status())

	// A failure keeps the configuration and is logged with its place.
	require.NoError(t, writeFile(path, "domain: reload\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: -1}\n"))
	_, loadErr := config.LoadContext(context.Background(), path, defaultConfigOptions(t))
	require.Error(t, loadErr)
	t1 := t0.Add(time.Minute)
	c.apply(config.Update{Err: loadErr}, t1)
	assert.Same(t, first, svc.Config())
	assert.Equal(t, ConfigStatus{Config: first, Source: path, LoadedAt: t0, LastError: loadErr, LastErrorAt: t1}, c.Status())
	var entry map[string]any
	require.NoError(t, json.Unmarshal(logs.Bytes(), &entry), logs.String())
	assert.Equal(t, "ERROR", entry["level"])
	assert.Equal(t, path, entry["file"])
	assert.EqualValues(t, 4, entry["line"])
	assert.EqualValues(t, 51, entry["column"])
	assert.Equal(t, "descriptors[0].rate_limit.requests_per_unit", entry["field"])
	assert.Contains(t, entry["err"], path+":4:51: ")

	// A success replaces it, and clears the error.
	require.NoError(t, writeFile(path, reloadYAML(9)))
	second, err := config.LoadContext(context.Background(), path, defaultConfigOptions(t))
	require.NoError(t, err)
	t2 := t1.Add(time.Minute)
	logs.Reset()
	c.apply(config.Update{Config: second}, t2)
	assert.Same(t, second, svc.Config())
	assert.Equal(t, ConfigStatus{Config: second, Source: path, LoadedAt: t2}, c.Status())
	assert.Contains(t, logs.String(), `"level":"INFO"`)

	assert.Equal(t, []error{loadErr, nil}, reloads.all())
}

// sentSource is a config.Source whose updates a test sends: a source the
// server does not know, which the config state follows all the same.
type sentSource struct {
	origin  config.Origin
	updates chan config.Update
}

func (s *sentSource) Origin() config.Origin { return s.origin }

func (s *sentSource) Load(context.Context) (*config.Config, error) { return nil, nil }

// send hands u to Run, failing the test when Run does not take it.
func (s *sentSource) send(t *testing.T, u config.Update) {
	t.Helper()
	select {
	case s.updates <- u:
	case <-time.After(2 * time.Second):
		t.Fatal("the source is not run")
	}
}

func (s *sentSource) Run(ctx context.Context, apply func(config.Update)) {
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-s.updates:
			apply(u)
		}
	}
}

// TestConfigStateFollowsAnySource: the config state takes what its source
// delivers, whatever the source: where the limits come from, each new
// Config with its version, each error, and it stops with the source.
func TestConfigStateFollowsAnySource(t *testing.T) {
	src := &sentSource{origin: config.Origin{Name: "a test's source", Resources: true}, updates: make(chan config.Update)}
	svc, err := rls.New(memory.New(), nil, defaultServiceOptions(t))
	require.NoError(t, err)
	c := newConfigState(svc, src, nil, time.Now(), slog.New(slog.DiscardHandler))
	assert.Equal(t, ConfigStatus{Source: "a test's source", Resources: true}, c.Status())
	reloads := &outcomes{}
	c.onReload(reloads.add)
	stop := c.follow(context.Background())

	first, err := config.Parse([]config.File{{Name: "first", Data: []byte(reloadYAML(4))}}, defaultConfigOptions(t))
	require.NoError(t, err)
	src.send(t, config.Update{Config: first, Version: "7"})
	require.Eventually(t, func() bool { return len(reloads.all()) == 1 }, 2*time.Second, tick)
	assert.Same(t, first, svc.Config())
	st := c.Status()
	assert.Same(t, first, st.Config)
	assert.Equal(t, "7", st.Version)
	assert.False(t, st.LoadedAt.IsZero())

	bad := errors.New("version 8 is bad")
	src.send(t, config.Update{Version: "8", Err: bad})
	require.Eventually(t, func() bool { return len(reloads.all()) == 2 }, 2*time.Second, tick)
	assert.Same(t, first, svc.Config(), "the limits in force stay")
	st = c.Status()
	assert.Equal(t, "7", st.Version)
	assert.Equal(t, bad, st.LastError)

	stop()
	select {
	case src.updates <- config.Update{Config: first}:
		t.Fatal("the source still runs after stop")
	default:
	}
	assert.Equal(t, []error{nil, bad}, reloads.all())
}

func TestRLConfigOfAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yml")
	require.NoError(t, os.WriteFile(path, []byte(reloadYAML(5)), 0o644))
	s := start(t, map[string]string{"RLS_CONFIG_PATH": path})
	_, body := getBody(t, s.http+"/rlconfig")
	first, _, _ := strings.Cut(body, "\n")
	assert.Regexp(t, `^loaded: \S+ from limits\.yml \(1 file\)$`, first)
	assert.Contains(t, body, "(limits.yml:1)")
}

// TestRLConfigShowsNoAbsolutePaths: /rlconfig names the files relative to
// an absolute RLS_CONFIG_PATH, in the rules and in reload errors, unless
// RLS_RLCONFIG_SHOW_PATHS asks for the full paths.
func TestRLConfigShowsNoAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "limits.yaml"), []byte(reloadYAML(5)), 0o644))
	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_POLL_INTERVAL": "50ms"})
	reloaded := make(chan error, 10)
	s.srv.OnConfigReload(func(err error) { reloaded <- err })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n"), 0o644))
	select {
	case err := <-reloaded:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("no reload")
	}
	_, body := getBody(t, s.http+"/rlconfig")
	assert.NotContains(t, body, dir)
	assert.Contains(t, body, "(limits.yaml:1)")
	assert.Contains(t, body, ": broken.yaml:4:24: descriptors[0].rate_limit.unit")

	require.NoError(t, os.Remove(filepath.Join(dir, "broken.yaml")))
	shown := start(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_RLCONFIG_SHOW_PATHS": "true", "RLS_CONFIG_WATCH": "false"})
	_, body = getBody(t, shown.http+"/rlconfig")
	assert.Contains(t, body, "from "+dir+" (1 file)")
	assert.Contains(t, body, "("+filepath.Join(dir, "limits.yaml")+":1)")
}

// TestConfigMaxBytes: files holding more than RLS_CONFIG_MAX_BYTES are not
// loaded at the start, and not reloaded later, with an error that names
// the setting; the limits in force stay.
func TestConfigMaxBytes(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "a.yaml"), reloadYAML(3)))
	limit := fmt.Sprint(len(reloadYAML(3)) + 10)

	set, err := loadSettings(map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_MAX_BYTES": fmt.Sprint(len(reloadYAML(3)) - 1)})
	require.NoError(t, err)
	_, err = New(context.Background(), set, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorContains(t, err, "a.yaml: cannot read: the limits files hold 117 bytes up to this one, more than the 116 they may hold (RLS_CONFIG_MAX_BYTES)")

	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_MAX_BYTES": limit})
	reloads := &outcomes{}
	s.srv.OnConfigReload(reloads.add)
	require.NoError(t, writeFile(filepath.Join(dir, "b.yaml"), "domain: other\n"))
	require.Eventually(t, func() bool { return len(reloads.all()) == 1 }, 2*time.Second, tick)
	assert.ErrorContains(t, reloads.all()[0], "b.yaml: cannot read: the limits files hold 131 bytes up to this one, more than the 127 they may hold (RLS_CONFIG_MAX_BYTES)")
	rpu, err := limitOf(context.Background(), s.client, "v")
	require.NoError(t, err)
	assert.EqualValues(t, 3, rpu, "the limits in force stay")
}

// TestConfigWarningsAreLogged: what `server check` warns of is logged when
// a configuration is put in force, one line each with its place, and no
// more than maxWarningsLogged lines of them.
func TestConfigWarningsAreLogged(t *testing.T) {
	yaml := "domain: w\ndescriptors:\n  - {key: path, value: /api/*, rate_limit: {unit: second, requests_per_unit: 10}}\n"
	for i := range maxWarningsLogged + 3 {
		yaml += fmt.Sprintf("  - {key: path, value: /api/v%d/*, rate_limit: {unit: second, requests_per_unit: 1}}\n", i)
	}
	cfg, err := config.Parse([]config.File{{Name: "w.yaml", Data: []byte(yaml)}}, defaultConfigOptions(t))
	require.NoError(t, err)
	require.Len(t, cfg.Warnings(), maxWarningsLogged+3)
	svc, err := rls.New(memory.New(), nil, defaultServiceOptions(t))
	require.NoError(t, err)
	var logs bytes.Buffer
	c := newConfigState(svc, config.NewStatic(config.Origin{Name: "w.yaml"}, nil), nil, time.Now(), slog.New(slog.NewJSONHandler(&logs, nil)))
	c.apply(config.Update{Config: cfg}, time.Now())

	var warnings []map[string]any
	dec := json.NewDecoder(&logs)
	for dec.More() {
		var entry map[string]any
		require.NoError(t, dec.Decode(&entry))
		if entry["level"] == "WARN" {
			warnings = append(warnings, entry)
		}
	}
	require.Len(t, warnings, maxWarningsLogged+1)
	first := warnings[0]
	assert.Equal(t, "shadowed", first["warning"])
	assert.Equal(t, "w.yaml", first["file"])
	assert.EqualValues(t, 4, first["line"])
	assert.Equal(t, "descriptors[1]", first["field"])
	assert.Contains(t, first["msg"], `the wildcard "/api/*" (line 3)`)
	assert.EqualValues(t, 3, warnings[maxWarningsLogged]["not_logged"])
}
