# Convenience recipes. Everything here is also a plain command (see README): `just` is optional.

# Build the release binary.
build:
    cargo build --release -p cnsreplay

# All tests (the README's test command, what CI runs).
test:
    scripts/test.sh

# Format and lint.
lint:
    cargo fmt --all
    cargo clippy --workspace --all-targets -- -D warnings

# Benchmarks whose numbers are recorded in docs/PERFORMANCE.md.
bench:
    cargo bench -p trace-format --bench decode
    scripts/bench-convert-rss.sh

# Fuzz one parser target for a while (needs cargo-fuzz; see fuzz/README.md).
fuzz target="decode_jsonl" seconds="300":
    scripts/fuzz.sh {{target}} {{seconds}}

# Man page and shell completions into target/doc-gen.
docs:
    cargo run -q -p cnsreplay -- man --dir target/doc-gen/man
    for s in bash zsh fish; do cargo run -q -p cnsreplay -- completions $s > target/doc-gen/cnsreplay.$s; done

# Local Kubernetes test cluster (etcd, kube-apiserver, controllers, kwok; see testenv/README.md).
testenv-up:
    testenv/up.sh

# Stop the processes testenv-up started (`just testenv-down --purge` also removes its state).
testenv-down *args:
    testenv/down.sh {{args}}
