# Build: docker build -t kserve-injector .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin kserve-injector

# distroless/cc: glibc for the binary, no shell (preStop uses `kserve-injector sleep`).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/kserve-injector /kserve-injector
USER 65532:65532
EXPOSE 9443 8081
ENTRYPOINT ["/kserve-injector"]
CMD ["serve"]
