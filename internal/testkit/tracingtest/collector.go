// Package tracingtest is an OTLP trace collector for tests: it takes the
// spans that OpenTelemetry's OTLP exporters send, over gRPC or HTTP, and
// keeps their names.
package tracingtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Collector records the spans exported to it. It is safe for concurrent
// use.
type Collector struct {
	collectortracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []string
}

// Export records the spans of req as "service.name: span name".
func (c *Collector) Export(_ context.Context, req *collectortracepb.ExportTraceServiceRequest) (*collectortracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, service+": "+s.GetName())
			}
		}
	}
	return &collectortracepb.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far, as "service.name: span name".
func (c *Collector) Spans() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans...)
}

// ServeGRPC serves c as an OTLP/gRPC collector on a loopback port until the
// test ends, and returns its endpoint for OTEL_EXPORTER_OTLP_ENDPOINT.
func (c *Collector) ServeGRPC(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortracepb.RegisterTraceServiceServer(srv, c)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return "http://" + lis.Addr().String()
}

// ServeHTTP serves c as an OTLP/HTTP collector (protobuf bodies at
// /v1/traces) on a loopback port until the test ends, and returns its
// endpoint for OTEL_EXPORTER_OTLP_ENDPOINT.
func (c *Collector) ServeHTTP(t testing.TB) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		var req collectortracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, _ := c.Export(r.Context(), &req)
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}
