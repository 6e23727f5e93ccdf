"""The application factory: `create_app(settings, engines=...)` builds a ready-to-serve FastAPI app.

    app = create_app(load_settings("config.yaml"))          # loads the configured models
    app = create_app(settings, engines={"cv": my_engine})   # tests: engines already made

At start the environment check (ownvoice.doctor, when installed) runs and is logged; with
`require_gpu: true` and no usable GPU the server refuses to start. Models then load and warm up
in the background on their own threads, so /health answers at once and /ready turns 200 when
they are warm. A model that fails to load calls `app.state.on_fatal(exc)` (the CLI stops the
server with an error) and marks /health unhealthy. With a `wyoming:` block, the Wyoming
listener (ownvoice/wyoming, for Home Assistant) runs in the same lifespan, on the same models,
queues and voice library (`app.state.wyoming`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from ownvoice import __version__
from ownvoice.errors import ModelLoadError
from ownvoice.server.auth import BodyLimit
from ownvoice.server.drain import Drain, DrainGuard
from ownvoice.server.errors import install_error_handlers
from ownvoice.server.hosts import HostGuard, HostPolicy
from ownvoice.server.openapi import document
from ownvoice.server.paths import CollapseSlashes
from ownvoice.server.refusals import RefusalLog
from ownvoice.server.routes import designs as design_routes
from ownvoice.server.routes import dialogue, health, models, page, speech, stream, voices
from ownvoice.server.settings import ServerSettings, load_settings
from ownvoice.service.designs import DesignLibrary
from ownvoice.service.library import VoiceLibrary
from ownvoice.service.metrics import Metrics
from ownvoice.service.pool import EnginePool
from ownvoice.service.speech import SpeechService

log = logging.getLogger("ownvoice.server")


def create_app(
    settings: ServerSettings | None = None,
    engines: dict | None = None,
    run_doctor: bool | None = None,
) -> FastAPI:
    """Build the app. `engines` (name -> engine) skips loading those models; `run_doctor`
    defaults to True unless engines are given."""
    settings = settings if settings is not None else load_settings(None)
    config = settings.service_config()
    metrics = Metrics()
    pool = EnginePool(config, engines, metrics)
    library = VoiceLibrary(settings.voices_dir)
    designs = DesignLibrary(settings.voices_dir, settings.designed_voices())
    service = SpeechService(config, pool, library, designs, metrics)
    drain = Drain(service)
    hosts = HostPolicy.from_settings(settings.server)
    doctor = run_doctor if run_doctor is not None else engines is None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        _warn_about_exposure(settings, app)
        _log_host_policy(settings, hosts)
        for note in settings.compat_notes():
            log.info("config: %s", note)
        log.info("%s", await asyncio.to_thread(_gpu_line, settings.device))
        removed = await asyncio.to_thread(library.clean_leftovers)
        if removed:
            log.info(
                "voice library: removed %d leftover(s) of interrupted uploads or deletes (%s)",
                len(removed),
                ", ".join(removed),
            )
        if doctor:
            await asyncio.to_thread(_check_environment, settings, app)
        loading = asyncio.create_task(_load(app))
        wyoming = app.state.wyoming = await _start_wyoming(app)
        try:
            yield
        finally:
            loading.cancel()
            if wyoming is not None:
                await wyoming.stop()
            pool.close()

    app = FastAPI(title="ownvoice", version=__version__, lifespan=lifespan)
    app.state.settings = settings
    app.state.service = service  # models, voices, metrics and every speech request
    app.state.drain = drain
    app.state.hosts = hosts  # the WebSocket checks Host and Origin itself (HostGuard: HTTP)
    app.state.warnings = []
    app.state.wyoming = None  # the Wyoming listener, once started
    app.state.on_fatal = None  # set by runner.run_server: stop serving when a model cannot load
    install_error_handlers(app)
    # the last added runs first: refusal log, slashes, Host/Origin checks, CORS, the drain, then
    # the body limit
    app.add_middleware(BodyLimit, max_bytes=int(settings.limits.max_upload_mb * 2**20))
    app.add_middleware(DrainGuard, drain=drain)
    if settings.server.allowed_origins:
        # a page of an allowed origin calls from the browser: it needs the preflight answered
        # and the CORS headers to read the audio; other origins get neither
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.allowed_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["Retry-After"],
        )
    app.add_middleware(HostGuard, policy=hosts)
    app.add_middleware(CollapseSlashes)
    app.add_middleware(RefusalLog)  # outermost: it sees every refusal, the guards' included
    for module in (speech, dialogue, stream, voices, design_routes, models, health, page):
        if hasattr(module, "public"):
            app.include_router(module.public)
        app.include_router(module.router)
    app.openapi = lambda: document(app, settings)
    return app


async def _load(app: FastAPI) -> None:
    settings, pool = app.state.settings, app.state.service.pool
    try:
        if not settings.lazy_load:  # uvicorn has just said "running on": say what comes next
            log.info(
                "loading %s; requests wait until it says ready (/ready answers 503 until then)",
                ", ".join(f"{n} ({s})" for n, s in pool.sources.items()),
            )
        await pool.start()
        host = settings.server.host
        host = f"[{host}]" if ":" in host else host
        # the line people coming from the Qwen3-TTS OpenAI server wait for (and grep)
        log.info("ready on http://%s:%d", host, settings.server.port)
        if settings.require_gpu and not settings.lazy_load:
            on_cpu = [
                n for n, w in pool.workers.items() if not str(w.engine.device).startswith("cuda")
            ]
            if on_cpu:
                raise ModelLoadError(
                    f"require_gpu is set but {', '.join(on_cpu)} runs on the CPU; "
                    "check the GPU with `ownvoice doctor`"
                )
    except Exception as e:
        log.error("start-up failed: %s", e)
        app.state.warnings.append(f"start-up failed: {e}")
        if app.state.on_fatal is not None:
            app.state.on_fatal(e)


async def _start_wyoming(app: FastAPI):
    """The Wyoming front end on the app's service objects, when the config asks for it."""
    settings = app.state.settings
    block = settings.wyoming
    if block.uri is None:
        return None
    from ownvoice.wyoming import WyomingOptions, WyomingServer

    options = WyomingOptions(
        uri=block.uri,
        voice=block.voice,
        seed=block.seed,
        zeroconf=block.zeroconf,
        max_connections=block.max_connections,
    )
    server = WyomingServer(options, app.state.service)
    await server.start()
    return server


def _gpu_line(device: str) -> str:
    """`GPU: <name> (<memory>, <CUDA|ROCm> <version>)`, or why none is used: the start-up line
    that tells at a glance whether speech will be fast."""
    try:
        import torch
    except ImportError:
        return "GPU: none (torch is not installed)"
    if device == "cpu":
        return "GPU: not used (device: cpu)"
    if not torch.cuda.is_available():
        gpu_build = torch.version.cuda or torch.version.hip
        why = "no usable GPU found by torch" if gpu_build else "a CPU-only build of torch"
        return f"GPU: none, running on the CPU ({why}; see `ownvoice doctor`)"
    index = (
        torch.device(device).index if device.startswith("cuda:") else torch.cuda.current_device()
    )
    props = torch.cuda.get_device_properties(index)
    stack = f"ROCm {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}"
    return f"GPU: {props.name} ({props.total_memory / 2**30:.1f} GB, {stack})"


def _check_environment(settings: ServerSettings, app: FastAPI) -> None:
    """ownvoice.doctor's start-up check: logs its findings, raises ModelLoadError when
    require_gpu is set and no GPU is usable; a GPU expected but unusable becomes a warning."""
    try:
        from ownvoice.doctor import check_at_start
    except ImportError:  # the doctor is optional; the server works without it
        return
    report = check_at_start(settings, logger=log)
    if report.expect_gpu and not report.gpu_usable:
        app.state.warnings.append(f"a GPU was expected but is not usable: {report.verdict}")


def _warn_about_exposure(settings: ServerSettings, app: FastAPI) -> None:
    host = settings.server.host
    auth = "with an API key" if settings.server.api_key else "without an API key"
    log.info("serving on %s:%d %s", host, settings.server.port, auth)
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and settings.server.api_key is None:
        message = (
            f"listening on {host} without an API key: anyone who can reach this port can use "
            "the server and change the voice library; set server.api_key"
        )
        app.state.warnings.append(message)
        log.warning("!!! %s !!!", message)


def _log_host_policy(settings: ServerSettings, hosts: HostPolicy) -> None:
    if hosts.any_host:
        if "*" not in settings.server.allowed_hosts:
            log.warning(
                "bound to %s with no server.allowed_hosts: any Host header is accepted (needed "
                "behind Docker port mapping); list the names clients use in "
                "server.allowed_hosts to block DNS rebinding",
                settings.server.host,
            )
        return
    names = sorted(hosts.hosts) + [f"*{s}" for s in hosts.suffixes]
    log.info("answering requests for hosts: %s (server.allowed_hosts)", ", ".join(names))
