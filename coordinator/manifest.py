"""run.json's manifest: everything needed to run an experiment again exactly (pure).

The command line as typed (credentials masked), every option as resolved after the preset and
the defaults of the day, the seeds, the versions of what ran and the hosts it ran on. A rerun
rebuilds its ``LaunchConfig`` from ``options`` alone, never from today's defaults or presets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

import strategies
from coordinator.config import AppTierSettings, HttpSettings, LaunchConfig
from coordinator.defaults import APP_THREADS, Timing
from coordinator.faults import spec as fault_spec
from coordinator.origin.user import Counter
from coordinator.trials.liveness import LossPolicy
from coordinator.trials.plan import ExpiryMode
from model.custom import OriginKind
from model.http.target import masked_header, masked_header_text
from model.services import ClientDriver, RedisPath, Services, mask_url
from model.workload import Workload
from results.store.schema import MANIFEST_VERSION
from strategies.plugins import PluginError, load_all

MASK = "***"
MIN_SECRET = 4  # a shorter password is masked where it stands in a URL, not searched elsewhere


class ManifestError(ValueError):
    """run.json holds no manifest this coordinator can read (one line saying which and why)."""


def _plain(value: Any) -> Any:
    """JSON-native (enums as values, tuples as lists), as run.json holds it."""
    return orjson.loads(orjson.dumps(value))


def workload_json(workload: Workload) -> dict[str, Any]:
    """The workload as run.json holds it: an HTTP origin's URL with its password masked (a
    rerun of such a run gets the masked URL: launch it again with the password instead)."""
    data = workload.to_json()
    if workload.origin.kind in (OriginKind.HTTP, OriginKind.SERVICE):
        data["origin"] = {**data["origin"], "read": mask_url(workload.origin.read)}
    return data


def options_of(config: LaunchConfig) -> dict[str, Any]:
    """Every option of ``config`` as resolved: enough to rebuild it without today's defaults."""
    options: dict[str, Any] = _plain({
        "preset": config.preset, "workers": config.workers, "clients": config.clients,
        "strategies": [{"name": s.name, "params": dict(s.params), "label": s.label}
                       for s in config.strategies],
        "ttl_s": config.ttl_s, "seconds": config.seconds, "repeat": config.repeat,
        "scale": config.scale, "pool_size": config.pool_size,
        "origin_target_ms": config.origin_target_ms, "seed": config.seed,
        "force_clock": config.force_clock, "keys": list(config.keys), "timing": asdict(config.timing),
        "faults": [f.label for f in config.faults], "net_control": config.net_control,
        "expiry": config.expiry.value,
        "workload": workload_json(config.workload), "embedded_stack": config.embedded,
        "on_worker_loss": config.on_worker_loss.value, "redis_client": config.redis_client.value,
        "client_driver": config.client_driver.value,
        # services given by URL beside the embedded stack (their URLs are given again to rerun)
        "given": sorted(k for k, v in vars(config.given).items() if v) if config.given else [],
        "counter": {"url": mask_url(config.counter.url) if config.counter.url else "",
                    "name": config.counter.name},
        "plugins": list(config.plugins),
        # the app tier (--app-servers); a remote one's URLs are given again to rerun
        "app": {"counts": list(config.app.counts), "threads": config.app.threads,
                "kind": config.app.kind},
        # the HTTP clients' options (a credential header's value masked: give it again to rerun)
        "http": {"headers": [list(masked_header(*h)) for h in config.http.headers],
                 "connect_ms": config.http.connect_ms, "read_ms": config.http.read_ms,
                 "verify": config.http.verify},
    })
    return options


def config_of(options: Mapping[str, Any], out: Path, services: Services | None) -> LaunchConfig:
    """The ``LaunchConfig`` the options describe (ManifestError when they do not)."""
    try:
        load_all(list(options.get("plugins") or []))  # their strategies, before they are named
    except PluginError as exc:
        raise ManifestError(str(exc)) from None
    try:
        return LaunchConfig(
            workers=int(options["workers"]), clients=int(options["clients"]),
            strategies=tuple(strategies.from_mapping(s["name"], s["params"])
                             for s in options["strategies"]),
            ttl_s=float(options["ttl_s"]), seconds=float(options["seconds"]),
            repeat=int(options["repeat"]), out=out, services=services, scale=int(options["scale"]),
            pool_size=int(options["pool_size"]), origin_target_ms=float(options["origin_target_ms"]),
            seed=bool(options["seed"]), force_clock=bool(options["force_clock"]),
            keys=tuple(str(k) for k in options["keys"]), timing=Timing(**options["timing"]),
            faults=tuple(fault_spec.parse(f) for f in options["faults"]),
            net_control=options.get("net_control"),  # absent in runs recorded before it: None
            expiry=ExpiryMode(options["expiry"]), workload=Workload.from_json(options["workload"]),
            preset=options["preset"],
            on_worker_loss=LossPolicy(options.get("on_worker_loss", LossPolicy.CONTINUE)),
            # runs recorded before --redis-client ran on the pooled client
            redis_client=RedisPath(options.get("redis_client", RedisPath.POOLED)),
            # runs recorded before --client-driver ran on threads
            client_driver=ClientDriver(options.get("client_driver", ClientDriver.THREADS)),
            counter=Counter(**options.get("counter", {})),
            plugins=tuple(options.get("plugins") or ()),
            app=AppTierSettings(counts=tuple(int(c) for c in options.get("app", {}).get("counts", [])),
                                threads=int(options.get("app", {}).get("threads", APP_THREADS)),
                                # runs recorded before --app-kind ran on the WSGI app
                                kind=str(options.get("app", {}).get("kind", "wsgi"))),
            http=_http(options.get("http")),  # absent in runs recorded before it: the defaults
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError(f"the manifest's options do not make a run: {type(exc).__name__}: {exc}"
                            ) from None


def _http(recorded: object) -> HttpSettings:
    if recorded is None:
        return HttpSettings()
    if not isinstance(recorded, Mapping):
        raise ValueError("http must be an object")
    return HttpSettings(tuple((str(n), str(v)) for n, v in recorded.get("headers", [])),
                        float(recorded["connect_ms"]), float(recorded["read_ms"]),
                        bool(recorded["verify"]))


def _secrets(urls: Sequence[str]) -> set[str]:
    found = set()
    for url in urls:
        try:
            parts = urlsplit(url)
            found.add(parts.password or "")
            found.update(v for k, v in parse_qsl(parts.query) if k.lower() == "password")
        except ValueError:
            continue
    return {s for s in found if len(s) >= MIN_SECRET}


def _mask_arg(arg: str) -> str:
    flag, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if "://" not in value:
        return flag + eq + masked_header_text(value) if ":" in value else arg
    try:
        return flag + eq + mask_url(value)
    except ValueError:
        return flag + eq + MASK


def mask_argv(argv: Sequence[str], services: Services | None) -> tuple[str, ...]:
    """The command line with every URL's password masked, and each known password wherever else
    it stands (the services' URLs may have come from the environment)."""
    urls = [a.partition("=")[2] if a.startswith("--") else a for a in argv if "://" in a]
    secrets = _secrets([*urls, *(services.to_env().values() if services else ())])
    return tuple(_replace_all(_mask_arg(arg), secrets) for arg in argv)


def _replace_all(text: str, secrets: set[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


@dataclass(frozen=True)
class Manifest:
    command: list[str]
    options: dict[str, Any]
    seeds: dict[str, Any]
    versions: dict[str, Any] | None = None  # None until the services have answered
    hosts: dict[str, Any] | None = None  # None until the workers have answered
    rerun_of: str | None = None  # the run this one repeats (``coordinator rerun``)
    extra: dict[str, Any] = field(default_factory=dict)  # fields of a newer minor writer, kept

    @classmethod
    def of(cls, config: LaunchConfig, versions: dict[str, Any] | None = None,
           hosts: dict[str, Any] | None = None) -> Manifest:
        return cls(list(config.command), options_of(config),
                   {"workload": config.workload.seed}, versions, hosts, config.rerun_of)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(data.pop("extra"))
        return data

    @classmethod
    def from_json(cls, meta: Mapping[str, Any]) -> Manifest:
        """The manifest of a whole run.json; ManifestError says which version is needed."""
        check_version(meta)
        data = meta["manifest"]
        if not isinstance(data, Mapping) or not isinstance(data.get("options"), Mapping):
            raise ManifestError("run.json's manifest is malformed (no options)")
        known = {"command", "options", "seeds", "versions", "hosts", "rerun_of"}
        return cls(list(data.get("command") or []), dict(data["options"]),
                   dict(data.get("seeds") or {}), data.get("versions"), data.get("hosts"),
                   data.get("rerun_of"), {k: v for k, v in data.items() if k not in known})

    def config(self, out: Path, services: Services | None, repeat: int | None = None
               ) -> LaunchConfig:
        """The recorded experiment, into ``out`` on ``services``, optionally repeated anew."""
        config = config_of(self.options, out, services)
        return replace(config, repeat=repeat) if repeat is not None else config


def check_version(meta: Mapping[str, Any]) -> None:
    """ManifestError unless ``meta`` holds a manifest this coordinator reads."""
    version = meta.get("manifest_version")
    if "manifest" not in meta or version is None:
        raise ManifestError(
            f"run.json has no manifest (written before manifest_version {MANIFEST_VERSION}, "
            f"schema_version {meta.get('schema_version', '?')}); this needs manifest_version "
            f"{MANIFEST_VERSION}: rebuild the command from run.json's spec")
    if not isinstance(version, int) or version > MANIFEST_VERSION:
        raise ManifestError(f"run.json has manifest_version {version}; this coordinator reads up "
                            f"to {MANIFEST_VERSION} (upgrade stampede-lab)")
