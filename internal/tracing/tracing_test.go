package tracing

import (
	"context"
	"errors"
	"net"
	"sort"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
	"github.com/ratewarden/ratewarden/internal/testkit/tracingtest"
)

const limits = `
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
`

// serve serves ShouldRateLimit over limiter, traced by tr, and grpc.health.v1
// on a loopback port, and returns a client connection and a function that
// stops the server once its calls are done, their spans ended.
func serve(t *testing.T, tr *Tracer, limiter rate.Limiter) (*grpc.ClientConn, func()) {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "edge.yaml", Data: []byte(limits)}}, rlstest.Config())
	require.NoError(t, err)
	svc, err := rls.New(tr.Limiter(limiter), cfg, rls.DefaultOptions())
	require.NoError(t, err)
	srv := grpc.NewServer(tr.ServerOptions()...)
	rlsv3.RegisterRateLimitServiceServer(srv, svc)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn, srv.GracefulStop
}

// waitSpans waits until exp holds n spans, for the server span ends after
// the client has its answer; it gives up after 10 seconds.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(exp.GetSpans()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Len(t, exp.GetSpans(), n)
}

func userRequest(user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}},
	}}}
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// spansOf returns the ended spans by name, each name's in the order they
// started.
func spansOf(exp *tracetest.InMemoryExporter) map[string][]tracetest.SpanStub {
	m := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		m[s.Name] = append(m[s.Name], s)
	}
	for _, spans := range m {
		sort.Slice(spans, func(i, j int) bool { return spans[i].StartTime.Before(spans[j].StartTime) })
	}
	return m
}

const serverSpan = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

func TestSpansContinueTheCallersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := New(context.Background(), Options{Exporter: exp, ServiceName: "rl-test"})
	require.NoError(t, err)
	conn, _ := serve(t, tr, memory.New())
	client := rlsv3.NewRateLimitServiceClient(conn)

	for _, c := range []struct {
		name, traceID, parentID string
		md                      metadata.MD
	}{
		{
			name: "W3C traceparent", traceID: "4bf92f3577b34da6a3ce929d0e0e4736", parentID: "00f067aa0ba902b7",
			md: metadata.Pairs("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
		},
		{
			name: "B3, as Envoy's Zipkin tracer sends it", traceID: "80f198ee56343ba864fe8b2a57d3eff7", parentID: "e457b5a2e4d86bd1",
			md: metadata.Pairs("x-b3-traceid", "80f198ee56343ba864fe8b2a57d3eff7", "x-b3-spanid", "e457b5a2e4d86bd1", "x-b3-sampled", "1"),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			exp.Reset()
			ctx := metadata.NewOutgoingContext(context.Background(), c.md)
			for range 2 { // the second is over the limit
				_, err := client.ShouldRateLimit(ctx, userRequest(c.name))
				require.NoError(t, err)
			}
			waitSpans(t, exp, 4)
			spans := spansOf(exp)
			require.Len(t, spans[serverSpan], 2)
			require.Len(t, spans["ratewarden.backend"], 2)
			for i, call := range spans[serverSpan] {
				assert.Equal(t, c.traceID, call.SpanContext.TraceID().String())
				assert.Equal(t, c.parentID, call.Parent.SpanID().String(), "the caller's span is the parent")
				assert.Equal(t, trace.SpanKindServer, call.SpanKind)
				a := attrs(call.Attributes)
				assert.Equal(t, "edge", a[attrDomain].AsString())
				assert.EqualValues(t, 1, a[attrDescriptors].AsInt64())
				assert.Equal(t, []string{"OK", "OVER_LIMIT"}[i], a[attrOverallCode].AsString())
				assert.Equal(t, "rl-test", resourceValue(call, "service.name"))

				backend := spans["ratewarden.backend"][i]
				assert.Equal(t, call.SpanContext.SpanID(), backend.Parent.SpanID(), "the backend call is a child of the call")
				assert.Equal(t, c.traceID, backend.SpanContext.TraceID().String())
				b := attrs(backend.Attributes)
				assert.EqualValues(t, 1, b[attrOps].AsInt64())
				assert.EqualValues(t, 0, b[attrRefunds].AsInt64())
				assert.EqualValues(t, i, b[attrDenied].AsInt64())
				_, failed := b[attrErrorKind]
				assert.False(t, failed)
			}
		})
	}

	t.Run("health checks are not traced", func(t *testing.T) {
		exp.Reset()
		_, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = client.ShouldRateLimit(context.Background(), userRequest("after the health check"))
		require.NoError(t, err)
		waitSpans(t, exp, 2)
		assert.ElementsMatch(t, []string{serverSpan, "ratewarden.backend"}, []string{exp.GetSpans()[0].Name, exp.GetSpans()[1].Name})
	})
}

func resourceValue(s tracetest.SpanStub, key string) string {
	v, _ := s.Resource.Set().Value(attribute.Key(key))
	return v.AsString()
}

// failing is a backend that fails.
type failing struct{}

func (failing) Do(context.Context, []rate.Op) ([]algorithms.Result, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
}

func TestBackendFailuresAreRecorded(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := New(context.Background(), Options{Exporter: exp})
	require.NoError(t, err)
	conn, _ := serve(t, tr, failing{})
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(), userRequest("u"))
	require.Error(t, err)
	waitSpans(t, exp, 2)

	spans := spansOf(exp)
	require.Len(t, spans["ratewarden.backend"], 1)
	backend := spans["ratewarden.backend"][0]
	assert.Equal(t, "unavailable", attrs(backend.Attributes)[attrErrorKind].AsString())
	assert.Equal(t, "Error", backend.Status.Code.String())
	require.Len(t, spans[serverSpan], 1)
	assert.Equal(t, "Error", spans[serverSpan][0].Status.Code.String(), "the call failed with UNAVAILABLE")
	assert.Equal(t, DefaultServiceName, resourceValue(spans[serverSpan][0], "service.name"))
}

func TestSamplingRate(t *testing.T) {
	zero := 0.0
	exp := tracetest.NewInMemoryExporter()
	tr, err := New(context.Background(), Options{Exporter: exp, SamplingRate: &zero})
	require.NoError(t, err)
	conn, stop := serve(t, tr, memory.New())
	client := rlsv3.NewRateLimitServiceClient(conn)
	_, err = client.ShouldRateLimit(context.Background(), userRequest("a"))
	require.NoError(t, err)
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	_, err = client.ShouldRateLimit(ctx, userRequest("b"))
	require.NoError(t, err)
	stop() // both calls done, their spans ended
	spans := exp.GetSpans()
	require.Len(t, spans, 2, "a rate of 0 samples no trace that starts here, but every trace the caller sampled")
	for _, s := range spans {
		assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.SpanContext.TraceID().String())
	}

	for _, bad := range []string{"2", "-0.1", "half"} {
		_, err := ParseSamplingRate(bad)
		assert.Error(t, err, bad)
	}
	r, err := ParseSamplingRate("0.25")
	require.NoError(t, err)
	assert.Equal(t, 0.25, *r)
}

// TestOTLPExporters sends a call's spans through the real OTLP exporters, as
// OTEL_EXPORTER_OTLP_ENDPOINT and the protocol say, to a collector. The
// SDK reads the variables from the process's environment: the call is made
// in a child process that has them.
func TestOTLPExporters(t *testing.T) {
	for _, protocol := range []string{ProtocolGRPC, ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			if tracingtest.IsChild(t) {
				tr, err := New(context.Background(), Options{Protocol: protocol})
				require.NoError(t, err)
				conn, stop := serve(t, tr, memory.New())
				_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(), userRequest("otlp"))
				require.NoError(t, err)
				stop() // the call's spans ended
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				require.NoError(t, tr.Shutdown(ctx), "the buffered spans are exported on shutdown")
				return
			}
			col := &tracingtest.Collector{}
			endpoint := col.ServeHTTP
			if protocol == ProtocolGRPC {
				endpoint = col.ServeGRPC
			}
			tracingtest.RunChild(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint(t), "OTEL_SERVICE_NAME=from-otel-env")
			assert.ElementsMatch(t, []string{"from-otel-env: " + serverSpan, "from-otel-env: ratewarden.backend"}, col.Spans())
		})
	}
}

func TestProtocol(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) string {
		return func(name string) string { return vars[name] }
	}
	for in, want := range map[string]string{"": ProtocolHTTP, "http": ProtocolHTTP, ProtocolHTTP: ProtocolHTTP, "grpc": ProtocolGRPC} {
		got, err := protocol(in, env(nil))
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
	got, err := protocol("", env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}))
	require.NoError(t, err)
	assert.Equal(t, ProtocolGRPC, got, "the OTEL_ variable decides when none is given")
	got, err = protocol("", env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}))
	require.NoError(t, err)
	assert.Equal(t, ProtocolHTTP, got, "the traces' own variable wins")
	_, err = Protocol("http/json")
	assert.ErrorContains(t, err, "tracing: ")
}
