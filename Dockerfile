# syntax=docker/dockerfile:1
#
# toolplane in a container: a static binary (CGO_ENABLED=0; SQLite is the
# pure-Go modernc.org/sqlite) on distroless static, as the non-root user
# nonroot (65532). State lives in the /data volume: the SQLite database and
# the credentials.env a first start writes beside it.
#
#   docker build -t toolplane --build-arg VERSION=v0.1.0 .
#   docker run -p 8080:8080 -v toolplane-data:/data toolplane --demo --public-url http://localhost:8080
#
# Arguments after the image name are added to the ENTRYPOINT's serve flags;
# --public-url should name where clients reach the container (approval
# links and the served OpenAPI document point there). For PostgreSQL, pass
# --database postgres://… (a later --database wins).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=devel
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/toolplane/toolplane/internal/cli.Version=${VERSION}" \
      -o /out/toolplane ./cmd/toolplane \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/toolplane /usr/local/bin/toolplane
# An empty /data owned by nonroot, so a fresh named volume is writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/toolplane", "serve", "--addr", "0.0.0.0:8080", "--database", "/data/toolplane.db"]
