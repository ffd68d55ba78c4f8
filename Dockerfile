# syntax=docker/dockerfile:1
# Build: docker build -t registry.example.com/kserve-injector:0.1.0 .
# Base images are build arguments; the defaults are the ones this file is
# checked with. The build stage needs Rust >= 1.89 (Cargo.toml rust-version)
# and a C compiler (ring, mimalloc), both in the official rust image.
# .ci/image_build.py runs the build stage in the context .dockerignore lays
# out, so keep its RUN steps inside WORKDIR (relative paths only).
ARG RUST_IMAGE=docker.io/library/rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Stripped: symbols are not needed in the image and double its size. Set
# before the first build, so that both builds share one profile.
ENV CARGO_PROFILE_RELEASE_STRIP=symbols
# cargo-auditable writes the dependency list (each crate's name, version and
# source) into the binary's .dep-v0 section, where image scanners (Trivy,
# Grype, `cargo audit bin`) read it; the section survives stripping.
RUN cargo install --locked cargo-auditable@0.7.7
# Dependencies first, against placeholder sources, so that editing src/
# rebuilds only this crate (the dependency layer stays cached). Every
# [[bench]] in Cargo.toml needs a file for cargo to read the manifest.
COPY Cargo.toml Cargo.lock ./
COPY core/Cargo.toml ./core/Cargo.toml
# The test oracle is a workspace member and a dev-dependency: cargo reads
# its manifest, never builds it for the binary, so an empty library stands in.
COPY oracle/Cargo.toml ./oracle/Cargo.toml
RUN mkdir -p src benches core/src oracle/src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs core/src/lib.rs oracle/src/lib.rs \
 && sed -n '/^\[\[bench\]\]/,/^name/s/^name *= *"\(.*\)"/\1/p' Cargo.toml \
    | while read -r b; do echo 'fn main() {}' > "benches/$b.rs"; done \
 && cargo auditable build --release --locked --bin kserve-injector \
 && rm -rf src benches core/src
COPY core/src ./core/src
COPY src ./src
COPY benches ./benches
RUN touch src/main.rs src/lib.rs core/src/lib.rs \
 && cargo auditable build --release --locked --bin kserve-injector \
 && cp "${CARGO_TARGET_DIR:-target}/release/kserve-injector" ./kserve-injector

# distroless/cc: glibc for the binary, no shell (preStop uses `kserve-injector sleep`).
FROM ${RUNTIME_IMAGE}
# OCI labels; .ci/image_build.py checks version and licenses against Cargo.toml.
ARG VERSION=0.1.0
ARG REVISION=""
ARG SOURCE_URL=""
LABEL org.opencontainers.image.title="kserve-injector" \
      org.opencontainers.image.description="Idempotent KServe pod-mutating admission webhook" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /src/kserve-injector /kserve-injector
USER 65532:65532
EXPOSE 9443 8081
ENTRYPOINT ["/kserve-injector"]
CMD ["serve"]
