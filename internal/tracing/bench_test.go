package tracing

import (
	"context"
	"strconv"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// BenchmarkShouldRateLimit measures a call with tracing on, its span made
// as the gRPC stats handler would, sampled or not; internal/rls's benchmark
// of the same name is the call without tracing.
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg, err := config.Parse([]config.File{{Name: "edge.yaml", Data: []byte(limits)}}, rlstest.Config())
	if err != nil {
		b.Fatal(err)
	}
	for _, rate := range []float64{1, 0} {
		b.Run("sampled="+strconv.FormatFloat(rate, 'g', -1, 64), func(b *testing.B) {
			tr, err := New(context.Background(), Options{Exporter: tracetest.NewNoopExporter(), SamplingRate: &rate})
			if err != nil {
				b.Fatal(err)
			}
			mem := memory.New()
			b.Cleanup(mem.Close)
			opts := rls.DefaultOptions()
			opts.BackendTimeout = 0
			svc, err := rls.New(tr.Limiter(mem), cfg, opts)
			if err != nil {
				b.Fatal(err)
			}
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = userRequest("u" + strconv.Itoa(i))
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ctx, span := tr.tracer.Start(context.Background(), serverSpan)
				if _, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				span.End()
			}
		})
	}
}
