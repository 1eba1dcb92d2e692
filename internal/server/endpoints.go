package server

import (
	"encoding/json"
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

	"github.com/ratewarden/ratewarden/internal/explain"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// maxJSONBody bounds the body of a /json request.
const maxJSONBody = 4 << 20

// newHTTPHandler returns the HTTP endpoints of svc and h:
//   - /healthcheck: liveness, for the probes that envoyproxy/ratelimit's
//     users point at it: 200 OK while h says the process serves (from the
//     backend's first answer on, a later backend outage included), 503 with
//     the reason otherwise;
//   - /ready: readiness: 200 OK when h says the service can decide
//     requests, 503 with the reason otherwise;
//   - /json: POST a RateLimitRequest as JSON, get the RateLimitResponse as
//     JSON, with status 429 when over limit (503 while no configuration is
//     loaded);
//   - /explain, when o.explain is set: POST a RateLimitRequest as JSON,
//     get what the service would do with it, and why, taking nothing
//     (see explain.Report); off as /json is;
//   - /rlconfig: the loaded limits, as text, opening with where and when
//     they were loaded when o.configStatus says so.
//
// Further endpoints (such as /metrics) can be added to the returned mux.
func newHTTPHandler(svc *rls.Service, h *Health, o httpOptions) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthcheck", probe(h.Live))
	mux.Handle("/ready", probe(h.Ready))
	if o.jsonOff != "" {
		mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
			httpError(w, http.StatusForbidden, o.jsonOff)
		})
	} else {
		mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) { serveJSON(svc, w, r) })
	}
	switch {
	case o.explain == nil:
	case o.jsonOff != "":
		off := strings.Replace(o.jsonOff, "rls: /json is off", "rls: /explain is off, as /json is", 1)
		mux.HandleFunc("/explain", func(w http.ResponseWriter, r *http.Request) {
			httpError(w, http.StatusForbidden, off)
		})
	default:
		mux.HandleFunc("/explain", func(w http.ResponseWriter, r *http.Request) { serveExplain(svc, o.explain, o.configRoot, w, r) })
	}
	mux.HandleFunc("/rlconfig", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		cfg := svc.Config()
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

// httpOptions say what newHTTPHandler serves beyond its defaults.
type httpOptions struct {
	// configStatus, when not nil, makes /rlconfig show its Config, opening
	// with where and when it was loaded and, when the last reload failed,
	// why:
	//
	//	loaded: 2026-11-21T10:00:00Z from ./config (2 files)
	//	last reload error: 2026-11-21T10:05:00Z: config/edge.yaml:14:13: descriptors[1].rate_limit.unit: …
	//
	// It is called for every request, concurrently.
	configStatus func() ConfigStatus
	// jsonOff, when not empty, makes /json answer 403 Forbidden with it,
	// taking and giving back nothing, and /explain likewise.
	jsonOff string
	// explain, when not nil, serves /explain.
	explain *explain.Explainer
	// configRoot is the prefix /rlconfig and /explain leave out of the
	// names of the configuration's files, and of the place it was loaded
	// from:
	// "edge.yaml:4" for "/etc/ratewarden/config/edge.yaml:4" with the root
	// "/etc/ratewarden/config/".
	configRoot string
}

// readRequest reads the RateLimitRequest in JSON that r, a POST to path,
// carries, or answers w with why it cannot and reports false.
func readRequest(w http.ResponseWriter, r *http.Request, path string) (*rlsv3.RateLimitRequest, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "rls: "+path+" takes POST")
		return nil, false
	}
	body, ok := readBody(w, r)
	if !ok {
		return nil, false
	}
	req, err := rls.ParseRequestJSON(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return nil, false
	}
	return req, true
}

// serveJSON is svc's ShouldRateLimit over HTTP with JSON bodies.
func serveJSON(svc *rls.Service, w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r, "/json")
	if !ok {
		return
	}
	resp, err := svc.ShouldRateLimit(r.Context(), req)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case status.Code(err) == codes.InvalidArgument:
			code = http.StatusBadRequest
		case status.Code(err) == codes.Unavailable, errors.Is(err, rls.ErrNoConfig):
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

// serveExplain answers an /explain request: its body, a RateLimitRequest
// in JSON, explained by svc and ex, with file names without the prefix
// root, as /rlconfig shows them; JSON with ?format=json, text otherwise.
// It takes and gives back nothing.
func serveExplain(svc *rls.Service, ex *explain.Explainer, root string, w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r, "/explain")
	if !ok {
		return
	}
	x, err := svc.Explain(req)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case status.Code(err) == codes.InvalidArgument:
			code = http.StatusBadRequest
		case errors.Is(err, rls.ErrNoConfig):
			code = http.StatusServiceUnavailable
		}
		httpError(w, code, status.Convert(err).Message())
		return
	}
	report, err := ex.Report(x, time.Now())
	if err != nil {
		httpError(w, http.StatusInternalServerError, "rls: "+err.Error())
		return
	}
	report.TrimFiles(root)
	switch format := r.URL.Query().Get("format"); format {
	case "", "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, report.Text())
	case "json":
		w.Header().Set("Content-Type", "application/json")
		writeJSON(w, report)
	default:
		httpError(w, http.StatusBadRequest, fmt.Sprintf("rls: format %q: want text or json", format))
	}
}

// readBody reads the body of r, up to maxJSONBody bytes; when it cannot,
// it answers the error and reports false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("rls: request body exceeds %d bytes", maxJSONBody))
			return nil, false
		}
		httpError(w, http.StatusBadRequest, "rls: reading request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}
