#!/usr/bin/env bash
# Installs everything gangstate needs on a fresh machine, idempotently:
#   - a Python 3.11+ virtualenv in .venv with gangstate (editable, its core compiled by mypyc)
#     and its test extras, every package at the version and hash of the lock file
#     requirements/test.txt (pip-compile from pyproject.toml; requirements/README.md);
#   - Java 17 and Maven when missing (Debian packages; needs root);
#   - the Kafka 4 broker jars from Maven Central, cached in ~/.cache/gangstate (or $GANGSTATE_CACHE);
#   - with --cluster: the local control plane (etcd, kube-apiserver, kube-controller-manager,
#     KWOK, koord-scheduler v1.8.0) built
#     with Go from the Go module proxy, cached by version in ~/.cache/gangstate/controlplane
#     (~10 min the first time on 2 cores here; under a second once cached), gangstate's
#     scheduler shim (shim/, cached by version and a hash of its sources; ~40 s with the Go
#     build cache warm from that build) and the native control plane (kube-apiserver,
#     kube-controller-manager and kube-scheduler of Kubernetes v1.37.2 with its own gang
#     scheduling; etcd and KWOK copied from the first; ~10 min more the first time, under a
#     second once cached; docs/cluster.md). The tests need them.
# Used by both README commands and by .ci/run. Re-running it is fast: each step checks first.
set -euo pipefail
cd "$(dirname "$0")/.."

cluster=0
for arg in "$@"; do
  case "$arg" in
    --cluster) cluster=1 ;;
    *) echo "usage: bash .ci/setup.sh [--cluster]" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "gangstate needs Python 3.11 or newer (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi

if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Java 17 and Maven (Debian packages) ..."
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null
  else
    echo "gangstate's local Kafka needs Java 17+ and Maven on PATH; install them, or set" >&2
    echo "KAFKA_BOOTSTRAP_SERVERS to a Kafka you already run." >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.gangstate-installed
want=$(cat pyproject.toml setup.py requirements/test.txt | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if [ "${GANGSTATE_PURE_CORE:-0}" = 1 ]; then
    echo "installing gangstate and its packages into .venv (core left as Python) ..."
  else
    echo "installing gangstate and its packages into .venv (compiles the core with mypyc) ..."
  fi
  .venv/bin/python -m pip install -q --upgrade pip
  # pip's output goes to a log shown only on failure (the build backend warns about editable
  # installs with a compiled top-level module, which is expected here)
  # the locked packages (hashes checked), then gangstate itself, built with the locked
  # setuptools and mypy (no build isolation: nothing unpinned is fetched to build it)
  if ! { .venv/bin/python -m pip install -q --require-hashes -r requirements/test.txt &&
         .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e '.[test]'; } \
      >.venv/install.log 2>&1; then
    cat .venv/install.log >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
# The core (streams/core) runs compiled by mypyc; recompile it when its sources changed since
# the last build (streams/core/__init__.py would otherwise fall back to the Python sources).
if [ "${GANGSTATE_PURE_CORE:-0}" != 1 ] && ! .venv/bin/python -W ignore -c \
    'import sys, streams.core as c; sys.exit(0 if c.COMPILED else 1)' 2>/dev/null; then
  echo "compiling the core (streams/core) with mypyc ..."
  if ! .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . \
      >.venv/install.log 2>&1; then
    cat .venv/install.log >&2
    exit 1
  fi
fi

.venv/bin/python deploy/kafka/broker.py fetch >/dev/null

if [ "$cluster" = 1 ]; then
  if ! command -v go >/dev/null; then
    echo "the local control plane is built with Go 1.26+ (go not found on PATH); install Go, or" >&2
    echo "run the tests without the cluster tier: .venv/bin/python -m pytest -m 'not cluster'" >&2
    exit 1
  fi
  .venv/bin/python deploy/cluster/controlplane.py build --shim >/dev/null
  .venv/bin/python deploy/cluster/controlplane.py build --native >/dev/null
fi
