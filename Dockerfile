# Rookery images hold nothing but the static rookery binary.
#
#   docker build -t rookery .                        build inside Docker (needs the golang image)
#   make build && docker build --target prebuilt -t rookery .
#                                                    copy a binary built on the host (no image pulls)
#
# The prebuilt stage comes first so that a builder without BuildKit, which runs
# every stage up to the target, never needs the golang image for it.

FROM scratch AS prebuilt
COPY bin/rookery /rookery
VOLUME /data
EXPOSE 6479 6480 6481 6482 6482/udp
ENTRYPOINT ["/rookery"]

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/rookery ./cmd/node

FROM scratch AS image
COPY --from=build /out/rookery /rookery
VOLUME /data
EXPOSE 6479 6480 6481 6482 6482/udp
ENTRYPOINT ["/rookery"]
