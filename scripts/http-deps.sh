#!/bin/sh
# What the HTTP layer needs from the system (issue 32): nginx (>= 1.22, with
# stub_status: Debian's nginx), Varnish (>= 7.1, with varnishadm and varnishstat; it compiles its
# VCL with the system's C compiler, which Debian's package depends on) and wrk (the C floor of
# the HTTP benchmark). Neither `make setup` nor `make demo` installs them; `make test-deps` does.
# As root with apt-get they are installed (Debian then starts nginx and varnish as system
# services where a service manager runs: on ports 80 and 6081; stampede-lab never uses those, it
# runs its own from configurations of its own); otherwise the line says what to install, and
# the exit code is 1.
set -eu
. "$(dirname "$0")/apt-missing.sh"
missing=""
for pair in nginx:nginx varnishd:varnish varnishadm:varnish varnishstat:varnish wrk:wrk; do
  bin=${pair%%:*} package=${pair#*:}
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
    case " $missing " in *" $package "*) ;; *) missing="$missing $package" ;; esac
  fi
done
# shellcheck disable=SC2086  # one word per package
install_missing "the HTTP layer (nginx, Varnish, wrk)" $missing
