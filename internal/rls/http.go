package rls

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratewarden/ratewarden/internal/config"
)

// maxJSONBody bounds the body of a /json request.
const maxJSONBody = 4 << 20

// HTTPHandler returns the service's HTTP endpoints:
//   - /healthcheck: liveness, for the probes that envoyproxy/ratelimit's
//     users point at it: 200 OK while h says the process serves (from the
//     backend's first answer on, a later backend outage included), 503 with
//     the reason otherwise;
//   - /ready: readiness: 200 OK when h says the service can decide
//     requests, 503 with the reason otherwise;
//   - /json: POST a RateLimitRequest as JSON, get the RateLimitResponse as
//     JSON, with status 429 when over limit (503 while no configuration is
//     loaded);
//   - /rlconfig: the loaded limits, as text, opening with where and when
//     they were loaded when WithConfigStatus says so.
//
// Further endpoints (such as /metrics) can be added to the returned mux.
func (s *Service) HTTPHandler(h *Health, opts ...HTTPOption) *http.ServeMux {
	var o httpOptions
	for _, opt := range opts {
		opt(&o)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthcheck", probe(h.Live))
	mux.Handle("/ready", probe(h.Ready))
	if o.jsonOff != "" {
		mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
			httpError(w, http.StatusForbidden, o.jsonOff)
		})
	} else {
		mux.HandleFunc("/json", s.serveJSON)
	}
	mux.HandleFunc("/rlconfig", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		cfg := s.Config()
		var st ConfigStatus
		if o.configStatus != nil {
			st = o.configStatus()
			cfg = st.Config
		}
		if cfg == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "no rate limit configuration loaded")
			if st.Source != "" {
				fmt.Fprintf(w, "waiting for %s\n", st.Source)
			}
			if st.LastError != nil {
				fmt.Fprintf(w, "last reload error: %s: %v\n", st.LastErrorAt.UTC().Format(time.RFC3339), st.LastError)
			}
			return
		}
		var b strings.Builder
		if o.configStatus != nil {
			st.writeHeader(&b)
		}
		b.WriteString(cfg.String())
		text := b.String()
		if o.configRoot != "" {
			text = strings.ReplaceAll(text, o.configRoot, "")
		}
		fmt.Fprint(w, text)
	})
	return mux
}

// probe answers 200 OK when check passes, 503 with the reason otherwise.
func probe(check func() (bool, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, why := check()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, why)
			return
		}
		fmt.Fprintln(w, "OK")
	})
}

// HTTPOption adds to what HTTPHandler serves.
type HTTPOption func(*httpOptions)

type httpOptions struct {
	configStatus func() ConfigStatus
	jsonOff      string // why /json is not served; "" when it is
	configRoot   string // the prefix /rlconfig leaves out of file names
}

// WithoutJSON makes /json answer 403 Forbidden with why, taking and giving
// back nothing.
func WithoutJSON(why string) HTTPOption {
	return func(o *httpOptions) { o.jsonOff = why }
}

// WithConfigRoot makes /rlconfig name the configuration's files, and the
// place it was loaded from, without the prefix root: "edge.yaml:4" for
// "/etc/ratewarden/config/edge.yaml:4" with the root
// "/etc/ratewarden/config/".
func WithConfigRoot(root string) HTTPOption {
	return func(o *httpOptions) { o.configRoot = root }
}

// WithConfigStatus makes /rlconfig show status's Config, opening with
// where and when it was loaded and, when the last reload failed, why:
//
//	loaded: 2026-11-21T10:00:00Z from ./config (2 files)
//	last reload error: 2026-11-21T10:05:00Z: config/edge.yaml:14: descriptors[1].rate_limit.unit: …
//
// status is called for every request, concurrently.
func WithConfigStatus(status func() ConfigStatus) HTTPOption {
	return func(o *httpOptions) { o.configStatus = status }
}

// ConfigStatus is the configuration in use, where and when it was loaded,
// and how the last attempt to reload it went.
type ConfigStatus struct {
	// Config is the configuration in use; nil when none is loaded.
	Config *config.Config
	// Source is where Config was loaded from: a file or a directory, or an
	// xDS server.
	Source string
	// Resources reports that Config's files are resources of an xDS
	// server.
	Resources bool
	// Version is the xDS server's version of Config; empty for files.
	Version string
	// LoadedAt is when Config was loaded.
	LoadedAt time.Time
	// LastError is why the last reload failed, leaving Config in use; nil
	// when the last reload, or the first load, succeeded.
	LastError error
	// LastErrorAt is when the last reload failed.
	LastErrorAt time.Time
}

// writeHeader writes the lines that open /rlconfig, and a blank line.
func (st ConfigStatus) writeHeader(w io.Writer) {
	n, files := len(st.Config.Files()), "file"
	if st.Resources {
		files = "resource"
	}
	if n != 1 {
		files += "s"
	}
	version := ""
	if st.Version != "" {
		version = fmt.Sprintf(", version %q", st.Version)
	}
	fmt.Fprintf(w, "loaded: %s from %s%s (%d %s)\n", st.LoadedAt.UTC().Format(time.RFC3339), st.Source, version, n, files)
	if st.LastError != nil {
		fmt.Fprintf(w, "last reload error: %s: %v\n", st.LastErrorAt.UTC().Format(time.RFC3339), st.LastError)
	}
	fmt.Fprintln(w)
}

// serveJSON is ShouldRateLimit over HTTP with JSON bodies.
func (s *Service) serveJSON(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "rls: /json takes POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("rls: request body exceeds %d bytes", maxJSONBody))
			return
		}
		httpError(w, http.StatusBadRequest, "rls: reading request body: "+err.Error())
		return
	}
	var req rlsv3.RateLimitRequest
	if err := loneSurrogate(body); err != nil {
		httpError(w, http.StatusBadRequest, "rls: request is not a RateLimitRequest in JSON: "+err.Error())
		return
	}
	if err := protojson.Unmarshal(body, &req); err != nil {
		httpError(w, http.StatusBadRequest, "rls: request is not a RateLimitRequest in JSON: "+err.Error())
		return
	}
	resp, err := s.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case status.Code(err) == codes.InvalidArgument:
			code = http.StatusBadRequest
		case status.Code(err) == codes.Unavailable, errors.Is(err, ErrNoConfig):
			code = http.StatusServiceUnavailable
		}
		httpError(w, code, status.Convert(err).Message())
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "rls: encoding response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// The headers Envoy would add to the client's response: retry-after
	// when over the limit, the limit headers when asked for.
	for _, hv := range resp.GetResponseHeadersToAdd() {
		w.Header().Set(hv.GetKey(), hv.GetValue())
	}
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}
