package rls

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody bounds the body of a /json request.
const maxJSONBody = 4 << 20

// HTTPHandler returns the service's HTTP endpoints:
//   - /healthcheck: 200 OK when h says the service can serve, 503 with the
//     reason otherwise;
//   - /json: POST a RateLimitRequest as JSON, get the RateLimitResponse as
//     JSON, with status 429 when over limit;
//   - /rlconfig: the loaded limits, as text.
//
// Further endpoints (such as /metrics) can be added to the returned mux.
func (s *Service) HTTPHandler(h *Health) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthcheck", func(w http.ResponseWriter, r *http.Request) {
		ok, why := h.Check()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, why)
			return
		}
		fmt.Fprintln(w, "OK")
	})
	mux.HandleFunc("/json", s.serveJSON)
	mux.HandleFunc("/rlconfig", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		cfg := s.Config()
		if cfg == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "no rate limit configuration loaded")
			return
		}
		fmt.Fprint(w, cfg.String())
	})
	return mux
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
	if err := protojson.Unmarshal(body, &req); err != nil {
		httpError(w, http.StatusBadRequest, "rls: request is not a RateLimitRequest in JSON: "+err.Error())
		return
	}
	resp, err := s.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		code := http.StatusInternalServerError
		switch status.Code(err) {
		case codes.InvalidArgument:
			code = http.StatusBadRequest
		case codes.Unavailable:
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
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		for _, hv := range resp.GetResponseHeadersToAdd() {
			w.Header().Set(hv.GetKey(), hv.GetValue())
		}
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}
