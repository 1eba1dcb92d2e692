package tlsx

import (
	"net/http"
	"slices"
)

// RequireClientCert serves next the requests over TLS with a verified
// client certificate, and the paths open to anyone; others get 403
// Forbidden. The TLS handshake verifies a certificate when one is
// presented (HTTP's Config); this is where its absence is refused. The
// server leaves its probes open: kubelet cannot present a certificate.
func RequireClientCert(next http.Handler, open ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(open, r.URL.Path) || (r.TLS != nil && len(r.TLS.VerifiedChains) > 0) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("rls: a client certificate is required (RLS_HTTP_TLS_CLIENT_CA_FILE)\n"))
	})
}
