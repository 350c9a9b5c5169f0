# One image for every role: `paddock manager`, `paddock broker`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The slim paddock: manager and broker only (tag nodev: no dev environment, no envtest or
# kustomize). VERSION and COMMIT are what `paddock version` reports (make docker-build sets them).
ARG VERSION=
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -tags nodev \
	-ldflags "-s -w -X github.com/paddock-dev/paddock/internal/buildinfo.version=${VERSION} -X github.com/paddock-dev/paddock/internal/buildinfo.commit=${COMMIT}" \
	-o /out/paddock .

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/paddock /paddock
USER 65532:65532
ENTRYPOINT ["/paddock"]
