# syntax=docker/dockerfile:1

# coordinatord container image: a static binary on distroless, running as the nonroot user.
#
#   docker build -t coordinatord .
#   docker run --stop-timeout 45 -p 7070:7070 -p 7071:7071 -v coordinatord-data:/var/lib/coordinatord \
#     coordinatord --advertised-listen HOST:7070
#
# --stop-timeout covers the drain of calls in flight (shutdown.drain.timeout.ms, 20 s) and the close
# of the state logs; HOST is the name clients reach the container by (FindCoordinator answers it).
#
# Ports: 7070 gRPC (sharecoord.v1, grpc.health.v1, reflection); 7071 HTTP /metrics, /healthz, /readyz.
# State (the state logs and the config store) lives in the /var/lib/coordinatord volume.
# Extra flags given to `docker run` are appended, e.g. `--config /etc/coordinatord/coordinatord.properties`.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
# The release the image is built as, shown by --version and in the start-up log:
# docker build --build-arg VERSION=$(git describe --tags --always) -t coordinatord .
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w -X main.buildVersion=${VERSION}" -o /coordinatord ./cmd/coordinatord
# The data directory must exist in the image, owned by nonroot, so that a fresh volume mounted
# there is writable without running as root.
RUN mkdir -p /rootfs/var/lib/coordinatord

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=unknown
LABEL org.opencontainers.image.title="coordinatord" \
      org.opencontainers.image.description="Standalone Kafka share coordinator (KIP-932 share-group state) served over gRPC" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build --chown=65532:65532 /rootfs/var/lib/coordinatord /var/lib/coordinatord
COPY --from=build /coordinatord /usr/local/bin/coordinatord
# Numeric, so that a kubelet can verify runAsNonRoot without a runAsUser.
USER 65532:65532
VOLUME ["/var/lib/coordinatord"]
EXPOSE 7070/tcp 7071/tcp
ENTRYPOINT ["/usr/local/bin/coordinatord", "--data-dir", "/var/lib/coordinatord", "--listen", "0.0.0.0:7070", "--metrics-listen", "0.0.0.0:7071"]
