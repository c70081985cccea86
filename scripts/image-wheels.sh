#!/bin/sh
# The image's wheelhouse (deploy/wheels), built on the host: pip inside a container build may
# have no network or no TLS trust. Runtime dependencies of pyproject.toml at the versions of
# constraints.txt (and the [libraries] extra), plus async-timeout (redis-py on Python < 3.11.3, e.g. Debian's 3.11.2) and
# setuptools (the build backend). Offline first: wheels already here are reused without an index.
#   PIP=.venv/bin/pip sh scripts/image-wheels.sh
set -eu
PIP=${PIP:-.venv/bin/pip}
DIR=deploy/wheels
REQ=$(mktemp)
trap 'rm -f "$REQ"' EXIT
"${PIP%/pip}/python" -c 'import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["libraries"]))' >"$REQ"
printf 'async-timeout\nsetuptools\n' >>"$REQ"
if ! "$PIP" wheel --quiet --no-index --find-links "$DIR" -w "$DIR" -c constraints.txt -r "$REQ" \
        >/dev/null 2>&1; then
    "$PIP" wheel --quiet -w "$DIR" -c constraints.txt -r "$REQ"
fi
# Drop wheels of versions no longer pinned, so the image cannot pick a stale one.
for wheel in "$DIR"/*.whl; do
    pin=$(basename "$wheel" | cut -d- -f1-2 | tr '_' '-' | sed 's/-\([^-]*\)$/==\1/')
    grep -qix "$pin" constraints.txt || rm -f "$wheel"
done
echo "$DIR: $(ls "$DIR"/*.whl | wc -l) wheels"
