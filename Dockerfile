# One image for every role: `paddock manager`, `paddock broker`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/paddock .

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/paddock /paddock
USER 65532:65532
ENTRYPOINT ["/paddock"]
