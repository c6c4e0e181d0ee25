# regtrack in an image: what scripts/install.sh installs on a Debian machine (the system
# tools, regtrack with the Python packages uv.lock pins, memtier_benchmark 2.3.0, the
# open-loop engine regtrack-openloop), for hosts that run containers
# (examples/kubernetes-indexed-job.yaml, docs/scale-out.md).
#
#   docker build -t REGISTRY/regtrack .
#   docker run --rm --security-opt seccomp=unconfined REGISTRY/regtrack doctor
#
# Without access to GitHub, put memtier_benchmark's release source archive
# (memtier_benchmark-2.3.0.tar.gz, checked against its SHA-256) in docker/archives/ first.
# The open-loop engine (engine/, Rust) is built in RUST_BASE (Docker Hub's Rust image on
# bookworm, the same C library as BASE) with the crate versions engine/Cargo.lock pins;
# where a registry cannot be reached, put a regtrack-openloop that a bookworm host's
# scripts/install.sh built in docker/archives/ and set RUST_BASE to any image with a shell
# (BASE will do): it is copied, after its version is checked, instead of built.
# BASE: another Debian bookworm to start from (the tests import one from the host's own
# packages); packages it already holds are not fetched again (docker/apt-missing.sh).
#
# regtrack runs as the unprivileged user `regtrack` (uid 1000). It controls Redis's hash
# seeds by bind-mounting a seed file over /dev/urandom in a private mount namespace, which
# an unprivileged user makes inside a user namespace of its own (regtrack/bench/seeds.py):
# that needs no capability, but the runtime's default seccomp profile refuses unshare(2)
# to a container without CAP_SYS_ADMIN. Run it with `--security-opt seccomp=unconfined`
# (Kubernetes: seccompProfile Unconfined); without it regtrack still measures and says
# the seeds are uncontrolled (`regtrack doctor`: hash seeds).
ARG BASE=debian:bookworm-slim
ARG RUST_BASE=rust:1-slim-bookworm

FROM ${RUST_BASE} AS engine
COPY engine/ /tmp/engine/
COPY docker/archives/ /tmp/archives/
RUN set -e; cd /tmp/engine; \
    want="regtrack-openloop $(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"; \
    if [ -f /tmp/archives/regtrack-openloop ]; then \
        install -D -m 0755 /tmp/archives/regtrack-openloop /usr/local/bin/regtrack-openloop; \
    else \
        cargo build --release --locked --target-dir /tmp/engine-target \
        && install -D -m 0755 /tmp/engine-target/release/regtrack-openloop \
            /usr/local/bin/regtrack-openloop; \
    fi; \
    found="$(/usr/local/bin/regtrack-openloop --version)"; \
    [ "$found" = "$want" ] || { echo "docker/archives/regtrack-openloop is $found, not $want: \
rebuild it (scripts/install.sh) or remove it"; exit 1; }

FROM ${BASE} AS system
COPY docker/apt-missing.sh docker/packages-runtime.txt /tmp/regtrack-image/
RUN sh /tmp/regtrack-image/apt-missing.sh /tmp/regtrack-image/packages-runtime.txt \
    && rm -rf /tmp/regtrack-image

# memtier_benchmark and the locked Python packages first: a change to regtrack's code
# rebuilds only the layers from `COPY regtrack/` on.
FROM system AS build
COPY docker/apt-missing.sh docker/packages-build.txt /tmp/regtrack-image/
RUN sh /tmp/regtrack-image/apt-missing.sh /tmp/regtrack-image/packages-build.txt
WORKDIR /opt/regtrack
# uv trusts the system's certificate store (ca-certificates, and a proxy's CA a base adds),
# as pip and git do, rather than only its own built-in roots.
ENV UV_SYSTEM_CERTS=true
COPY pyproject.toml uv.lock ./
COPY scripts/install.sh scripts/uv-requirements.txt scripts/
COPY docker/archives/ /tmp/regtrack-image/archives/
RUN archive=/tmp/regtrack-image/archives/memtier_benchmark-2.3.0.tar.gz; \
    if [ -f "$archive" ]; then export REGTRACK_MEMTIER_ARCHIVE="$archive"; fi; \
    scripts/install.sh --no-project
COPY README.md ./
COPY configs/ configs/
COPY regtrack/ regtrack/
# uv itself (.tools) only installed; the image keeps .venv and the source it points to.
RUN scripts/install.sh && rm -rf .tools /tmp/regtrack-image

FROM system
COPY --from=build /opt/regtrack /opt/regtrack
COPY --from=engine /usr/local/bin/regtrack-openloop /opt/regtrack/.venv/bin/regtrack-openloop
# A source repository bind-mounted from the host at /sources (--source-repo /sources)
# belongs to another uid, which git refuses unless told to trust it: only that path is.
RUN git config --system --add safe.directory /sources \
    && git config --system --add safe.directory /sources/.git \
    && mkdir -p /home \
    && useradd --create-home --uid 1000 --user-group --shell /bin/bash regtrack \
    && mkdir -p /home/regtrack/.cache/regtrack /home/regtrack/reports \
    && chown -R regtrack:regtrack /home/regtrack
ENV PATH=/opt/regtrack/.venv/bin:$PATH
USER regtrack
WORKDIR /home/regtrack
ENTRYPOINT ["regtrack"]
CMD ["doctor"]
