# The lmcc container image: `lmcc node` on Debian 12 (bookworm), the image
# deploy/kubernetes/statefulset.yaml names:
#
#   docker build -t lmcc:0.1.0 .
#
# NEVER BUILT HERE: the machines lmcc is developed and tested on have neither
# Docker nor the network to pull base images, so this file is kept minimal.
# tests/deploy/test_kubernetes.py checks only that it agrees with the
# manifests (binary path, user, data volume) and that the runtime stage
# installs the package of every library the lmcc binary links.

# -- build: the packages `make build` uses, and a release build of `lmcc` -------
# The CMake defaults, not `make build`'s: LMCC_FAULT_INJECTION stays OFF, so
# the image has no POST /admin/faults and no planted bugs
# (tests/deploy/test_release_build.py checks this file for it).
FROM debian:bookworm AS build
WORKDIR /src
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN deploy/install-deps.sh --build-only
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMCC_BENCH=OFF \
 && cmake --build /build --target lmcc

# -- runtime: the shared libraries lmcc links and the binary, nothing else ------
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libcaf-core0.17 libcaf-io0.17 librocksdb7.8 libzmq5 libssl3 libyaml-cpp0.7 \
      libspdlog1.10 libfmt9 libabsl20220623 libsimdjson14 libcpp-httplib0.11 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 lmcc \
 && useradd --system --uid 10001 --gid lmcc --home-dir /var/lib/lmcc --no-create-home lmcc \
 && mkdir -p /var/lib/lmcc /etc/lmcc \
 && chown lmcc:lmcc /var/lib/lmcc
COPY --from=build /build/lmcc /usr/local/bin/lmcc
USER 10001:10001
WORKDIR /var/lib/lmcc
VOLUME /var/lib/lmcc
# HTTP, then LMCache's pull, reply and heartbeat ports, then the cluster port
# (deploy/kubernetes/configmap.yaml).
EXPOSE 9000 8300 8400 8082 9004
ENTRYPOINT ["/usr/local/bin/lmcc"]
# One node with LMCache's default ports; the StatefulSet gives its own command.
CMD ["node", "--data-dir", "/var/lib/lmcc"]
