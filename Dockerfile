# syntax=docker/dockerfile:1
#
# Every toolbus binary (each cmd/* package: toolbus, parser, executor, formatter, healthd,
# engineering, ...) in one small image, plus the example ticket service in its own.
#
#   docker build -t toolbus .                                   # the default target
#   docker build --target ticket-service -t toolbus-tickets .
#
# compose.yaml builds both; run one binary per container: `command: ["executor", ...]`.

ARG GO_VERSION=1.26.8
ARG ALPINE_VERSION=3.22

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-alpine AS build
ARG TARGETOS
ARG TARGETARCH
# The version every binary reports (--version, telemetry's service.version):
#   docker build --build-arg VERSION=v1.2.3 .
ARG VERSION=devel
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    mkdir -p /out /examples && \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w -X github.com/toolbus/toolbus/pkg/version.Stamp=${VERSION}" -o /out/ ./cmd/... && \
    if [ -d examples/ticket-service ]; then \
      GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /examples/ticket-service ./examples/ticket-service; \
    fi

# The example ticket service (a plain JSON-RPC tool service) on its own.
FROM alpine:${ALPINE_VERSION} AS ticket-service
RUN apk add --no-cache ca-certificates && adduser -D -H -u 10001 toolbus
COPY --from=build /examples/ /usr/local/bin/
RUN test -x /usr/local/bin/ticket-service || { echo "examples/ticket-service is not in the build context" >&2; exit 1; }
USER 10001
ENTRYPOINT ["ticket-service"]

# toolbus: every binary in /usr/local/bin, run as an unprivileged user. The last stage is
# the default target.
FROM alpine:${ALPINE_VERSION} AS toolbus
ARG VERSION=devel
LABEL org.opencontainers.image.title="toolbus" org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/toolbus/toolbus"
RUN apk add --no-cache ca-certificates tzdata && adduser -D -H -u 10001 toolbus
COPY --from=build /out/ /usr/local/bin/
USER 10001
CMD ["toolbus", "--help"]
