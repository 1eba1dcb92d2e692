# ratewarden's image: a static binary and the example limits on distroless,
# running as a non-root user.
#
#   docker build -t ratewarden .
#   docker run -p 8080:8080 -p 8081:8081 ratewarden
#
# There is no HEALTHCHECK: the final image has no shell, curl or wget to run
# one, and the binary has no probe mode. Orchestrators probe from outside
# instead: Kubernetes with an HTTP GET of /healthcheck on 8080 (see
# envoy/istio/ratewarden.yaml), others with grpc.health.v1 on 8081.

FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/ratewarden ./cmd/server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /out/ratewarden /usr/local/bin/ratewarden
# Manifests made for envoyproxy/ratelimit run `/bin/ratelimit`: the same
# server answers to that name (a copy: there is no shell to make a link).
COPY --from=builder /out/ratewarden /bin/ratelimit
COPY config/ /etc/ratewarden/config/
# The example limits are ./config, RLS_CONFIG_PATH's default. No RLS_
# variable is set here: it would win over the envoyproxy/ratelimit
# variables (RUNTIME_ROOT, ...) of a Deployment made for it.
WORKDIR /etc/ratewarden
# distroless's "nonroot" user, by number so that Kubernetes' runAsNonRoot
# can verify it.
USER 65532:65532
# HTTP (/healthcheck, /json, /rlconfig) and gRPC (RateLimitService).
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/ratewarden"]
