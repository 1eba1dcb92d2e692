# The released image: ./Dockerfile's final stage, from the binaries the
# release built (.goreleaser.yaml's dockers_v2) instead of a builder stage.
# GoReleaser builds it for linux/amd64 and linux/arm64 with buildx, in a
# context holding linux/amd64/ratewarden, linux/arm64/ratewarden and
# config/; it is not built by hand.

FROM gcr.io/distroless/static-debian12:nonroot
ARG TARGETPLATFORM
COPY $TARGETPLATFORM/ratewarden /usr/local/bin/ratewarden
# Manifests made for envoyproxy/ratelimit run `/bin/ratelimit`: the same
# server answers to that name (a copy: there is no shell to make a link).
COPY $TARGETPLATFORM/ratewarden /bin/ratelimit
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
