"""The configured models: one Scheduler each, the roles they serve, their start-up and health.

Roles (presets, design, clone) come from the config, else from the only model of the right type,
else from the largest of that type (roles.py); the log says which model serves what and why. Models load and warm up at start (or on first use with
`lazy_load`); the log says `Model <name> ready on <device>` and names the GPU, and says loudly
when the engine runs on the CPU although a GPU was asked for or expected.
"""

from __future__ import annotations

import asyncio
import logging
import os

from ownvoice.errors import InvalidInput, ModelLoadError, ServiceUnavailable
from ownvoice.service.config import ServiceConfig
from ownvoice.service.roles import choose_roles, model_size_hint, model_type_hint
from ownvoice.service.scheduler import Scheduler

log = logging.getLogger("ownvoice.server")

ROLE_VOICES = {
    "presets": "preset voices",
    "design": "designed voices",
    "clone": "cloned voices (clone:<name>)",
}
ROLE_HELP = {
    "presets": "preset speakers need a CustomVoice model; set roles.presets",
    "design": "voice design needs a VoiceDesign model; set roles.design",
    "clone": "cloned voices need a Base model; set roles.clone",
}


class EnginePool:
    def __init__(
        self,
        config: ServiceConfig,
        engines: dict | None = None,
        metrics=None,
        warm: bool = True,  # False: engines handed in are used as they are (no warm-up)
    ):
        self.config = config
        self.workers: dict[str, Scheduler] = {}
        self.sources: dict[str, str] = {}
        self._on_cpu: list[str] = []  # models on the CPU though the config did not ask for it
        engines = dict(engines or {})
        types: dict[str, str | None] = {}
        self.sizes: dict[str, int | None] = {}
        limits = config.limits

        def scheduler(name, loader, engine):
            return Scheduler(
                name,
                loader=loader,
                engine=engine,
                max_batch=config.max_batch,
                queue_size=limits.queue_size,
                keepalive_s=config.keepalive_s,
                metrics=metrics,
                warm=warm,
            )

        for spec in config.models:
            given = engines.pop(spec.name, None)
            self.sources[spec.name] = spec.source
            self.workers[spec.name] = scheduler(
                spec.name, lambda source=spec.source: _load_engine(source, config), given
            )
            types[spec.name] = (
                given.model_type if given is not None else model_type_hint(spec.source, spec.type)
            )
            self.sizes[spec.name] = model_size_hint(spec.source) if given is None else None
        for name, given in engines.items():  # engines handed in without a config entry (tests)
            self.sources[name] = f"<{type(given).__name__}>"
            self.workers[name] = scheduler(name, None, given)
            types[name] = given.model_type
        self.types = types
        self._choose_roles()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every thread; unless lazy, load and warm every model (raises ModelLoadError)."""
        load_now = not self.config.lazy_load
        futures = {name: w.start(load_now) for name, w in self.workers.items()}
        for name, future in futures.items():
            try:
                await asyncio.wrap_future(future)
            except Exception as e:
                reason = e.__cause__ if isinstance(e, ServiceUnavailable) and e.__cause__ else e
                source = self.sources[name]
                raise ModelLoadError(
                    f"model {name!r} ({source}) failed to load: {reason}. {_fix(name, source)}"
                ) from e
            if load_now:
                self._on_ready(name)
        if load_now:
            self.types = {n: w.engine.model_type for n, w in self.workers.items()}
            self._choose_roles()  # against the real types
        log.info("roles: %s", ", ".join(f"{r}={m}" for r, m in self.roles.items()) or "none")
        for role, choice in self._choices.items():
            log.info("%s: model %s (%s)", ROLE_VOICES[role], choice.model, choice.why)

    def start_threads(self) -> None:
        """Start every thread without waiting for any model (in-process use: the engines
        were handed in, loaded)."""
        for worker in self.workers.values():
            worker.start(load_now=False)

    def _choose_roles(self) -> None:
        self._choices = choose_roles(self.config.roles, self.types, self.sizes)
        self.roles = {role: c.model for role, c in self._choices.items()}

    def close(self) -> None:
        for w in self.workers.values():
            w.stop()

    def _on_ready(self, name: str) -> None:
        worker = self.workers[name]
        engine = worker.engine
        device = str(engine.device)
        gpu = gpu_name(device)
        where = f"{device} ({gpu})" if gpu else device
        log.info(
            "Model %s ready on %s [%s, %s, batch %d, warm-up %.1f s]",
            name, where, engine.model_type, engine.dtype, worker.rows,
            worker.warmup_seconds or 0.0,
        )  # fmt: skip
        if device.startswith("cpu") and self.config.engine.device != "cpu":
            self._on_cpu.append(name)
            log.warning("!!! %s !!!", self.warnings[0])

    @property
    def warnings(self) -> list[str]:
        """What /health and the page show: one line for all the models on the CPU, with the fix."""
        if not self._on_cpu:
            return []
        which = (
            f"model {self._on_cpu[0]} runs"
            if len(self._on_cpu) == 1
            else (f"models {', '.join(self._on_cpu)} run")
        )
        return [
            f"{which} on the CPU (device: {self.config.engine.device}); speech will be much "
            "slower than real time. Install a CUDA/ROCm build of torch (check it with "
            "`ownvoice doctor`), or set `device: cpu` to silence this warning"
        ]

    # -- lookups ------------------------------------------------------------------------------

    def for_role(self, role: str, param: str = "voice") -> Scheduler:
        name = self.roles.get(role)
        if name is None:
            raise InvalidInput(f"this server has no {role} model: {ROLE_HELP[role]}", param=param)
        return self.workers[name]

    def find_model(self, model: str) -> Scheduler | None:
        """A worker by model name or by its source (hub id / folder), case-insensitively."""
        for name, w in self.workers.items():
            if model.lower() in (name.lower(), self.sources[name].lower()):
                return w
        return None

    def model_key(self, worker: Scheduler) -> str:
        """What identifies the model to the voice-prompt cache."""
        fingerprint = worker.engine.model_fingerprint if worker.engine is not None else None
        return fingerprint or f"{worker.name}:{self.sources[worker.name]}"

    @property
    def ready(self) -> bool:
        lazy_ok = ("not loaded", "loaded") if self.config.lazy_load else ()
        return all(w.ready or w.state in lazy_ok for w in self.workers.values())

    @property
    def generating(self) -> int:
        return sum(w.admission.running for w in self.workers.values())

    @property
    def waiting(self) -> int:
        return sum(w.admission.waiting for w in self.workers.values())

    def status(self) -> dict:
        out = {}
        for name, w in self.workers.items():
            e = w.engine
            out[name] = {
                "state": w.state,
                "type": self.types.get(name),
                "source": self.sources[name],
                "roles": [r for r, m in self.roles.items() if m == name],
                "device": str(e.device) if e is not None else None,
                "dtype": str(e.dtype) if e is not None else None,
                "gpu": gpu_name(str(e.device)) if e is not None else None,
                "batch": {"rows": w.occupancy, "max": w.rows},
            }
            if w.error is not None:
                out[name]["error"] = str(w.error)
        return out


def _load_engine(source: str, config: ServiceConfig):
    from dataclasses import replace

    from ownvoice.engine.engine import Engine

    return Engine.load(source, config=replace(config.engine, max_batch=config.max_batch))


def gpu_name(device: str) -> str | None:
    if not device.startswith("cuda"):
        return None
    try:
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    except Exception:
        return None


def _fix(name: str, source: str) -> str:
    """What to do when a model did not load, for a folder or a hub id."""
    if os.path.isdir(os.path.expanduser(source)):
        return "To fix: check that the folder holds a whole checkpoint (`ownvoice doctor` says)"
    return (
        f"To fix: download it once with network access (`hf download {source}`), or give a "
        f"checkpoint folder you have (`ownvoice serve --model DIR`, or models.{name}.source: DIR "
        "in the config); `ownvoice doctor` checks it"
    )
