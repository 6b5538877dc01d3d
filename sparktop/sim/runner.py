"""Starts a simulated cluster on loopback: one SSH server per node, one HTTP server per
engine, the model ticking, a scenario playing, and an inventory to point sparktop at.

The directory gets ``cluster.yaml`` (loads with :func:`sparktop.inventory.load_inventory`),
``known_hosts`` (every node's host key, so the client verifies keys as with real nodes),
``id_ed25519`` (the client key every node accepts) and an empty ``ssh_config`` (so the
user's ``~/.ssh/config`` cannot redirect ``127.0.0.1``).

Example::

    sim = await start_sim(SimOptions(nodes=4, scenario="thermal", speed=10))
    print(sim.inventory_path)
    sim.set_scenario("node-down")
    await sim.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from sparktop.alerts.thresholds import Thresholds
from sparktop.sim import llamacpp
from sparktop.sim.clock import SimClock
from sparktop.sim.engine import LoadSpec
from sparktop.sim.exporters import (
    DcgmCollector,
    ExporterServer,
    NodeExporterCollector,
    dcgm_text,
    node_address,
)
from sparktop.sim.gb10 import Gb10Responder
from sparktop.sim.gpu import Fault
from sparktop.sim.httpserver import EngineServer
from sparktop.sim.model import SimCluster
from sparktop.sim.rates import ProfileRates
from sparktop.sim.scenarios import (
    LOAD_SHIFT,
    LONG_PROMPT_TOKENS,
    SCENARIOS,
    SPEC_COLLAPSED,
    Act,
    Player,
)
from sparktop.sim.sshserver import SshServerHandle, generate_key, start_ssh_server
from sparktop.sweep.profiles.builtin import FOLDER, builtin_profile_names
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

log = logging.getLogger(__name__)

TICK_WALL_S = 0.05
"""How often (wall seconds) the runner advances the model and plays the scenario."""

SSH_USER = "sparktop"
LLAMACPP_ENGINE = "llama"


@dataclass(frozen=True, slots=True)
class SimOptions:
    """What to simulate. ``max_num_seqs`` None = the profile's, raised until the KV pool can
    fill (see :func:`sparktop.sim.rates.default_max_num_seqs`); ``kv_pool_tokens`` None = the
    profile's. ``old_driver_nodes`` answer like a driver before 535 (no
    ``clocks_event_reasons*`` fields). ``alert_hold_s`` goes into the generated inventory as
    ``alerts: {hold_s: …}`` (wall seconds; None = the monitor's default). ``exporters`` also
    starts a dcgm-exporter and a node_exporter page per node (:mod:`sparktop.sim.exporters`),
    each node on its own loopback address, for a real Prometheus to scrape. ``llamacpp``
    adds a llama.cpp engine beside the vLLM ones."""

    nodes: int = 4
    engines: int = 1
    profile: str = DEFAULT_PROFILE
    scenario: str = "normal"
    speed: float = 1.0
    seed: int = 0
    interval_s: float = 1.0
    max_num_seqs: int | None = None
    kv_pool_tokens: int | None = None
    load: LoadSpec | None = None
    old_driver_nodes: tuple[str, ...] = ()
    alert_hold_s: float | None = None
    exporters: bool = False
    llamacpp: bool = False
    """Also serve a llama.cpp engine (:data:`LLAMACPP_ENGINE`, :mod:`sparktop.sim.llamacpp`)
    on no TP group, with :data:`~sparktop.sim.llamacpp.SLOTS` slots."""


@dataclass(frozen=True, slots=True)
class Targets:
    """Which node or engine each fault hits."""

    thermal: str
    low_power: str
    down: str
    engine: str | None
    slow: str = ""
    pressure: str = ""
    link: str = ""


class SimHandle:
    """A running simulator. Attributes: ``options``, ``clock``, ``cluster`` (the model),
    ``ssh`` (node → :class:`SshServerHandle`), ``http`` (engine → :class:`EngineServer`),
    ``directory`` and the paths of the generated files, ``targets``."""

    def __init__(
        self,
        options: SimOptions,
        directory: Path,
        own_directory: bool,
        clock: SimClock | None = None,
    ) -> None:
        self.options = options
        self.directory = directory
        self._own_directory = own_directory
        self.inventory_path = directory / "cluster.yaml"
        self.known_hosts_path = directory / "known_hosts"
        self.identity_path = directory / "id_ed25519"
        self.ssh_config_path = directory / "ssh_config"
        self.clock = clock or SimClock(options.speed)
        rates = ProfileRates.load(options.profile, options.max_num_seqs, options.kv_pool_tokens)
        self.cluster = SimCluster(
            rates, nodes=options.nodes, engines=options.engines, seed=options.seed,
            load=options.load, **served_model(rates.profile.model),
        )  # fmt: skip
        self.ssh: dict[str, SshServerHandle] = {}
        self.responders: dict[str, Gb10Responder] = {}
        self.http: dict[str, EngineServer] = {}
        self.dcgm: dict[str, ExporterServer] = {}
        self.node_exporter: dict[str, ExporterServer] = {}
        names = list(self.cluster.gpus)
        group = next(iter(self.cluster.groups.values()), tuple(names))
        self.targets = Targets(
            thermal=group[1 % len(group)],
            low_power=group[2 % len(group)],
            down=group[-1],
            engine=next(iter(self.cluster.engines), None),
            slow=group[3 % len(group)],
            pressure=group[0],
            link=group[1 % len(group)],
        )
        self._load = options.load or LoadSpec()
        self.llamacpp: set[str] = set()
        if options.llamacpp:
            self._add_llamacpp(rates)
        self._player: Player | None = None
        self.scenario = ""
        self._task: asyncio.Task[None] | None = None
        self._actions: asyncio.Queue[Act] = asyncio.Queue()

    def _add_llamacpp(self, rates: ProfileRates) -> None:
        """The llama.cpp engine: the profile's rates and context per slot, SLOTS slots
        sharing a pool of SLOTS contexts (``llama-server -c`` = slots × ``n_ctx``)."""
        slots = llamacpp.SLOTS
        pool = slots * rates.limits.max_model_len
        own = ProfileRates(rates.profile, max_num_seqs=slots, kv_pool_tokens=pool)
        first = next(iter(self.cluster.engines.values()), None)
        model = first.model_name if first else "DeepSeek-V4.1-Flash-1017"
        gguf = model.rsplit("/", 1)[-1] + "-Q8_0.gguf"
        self.cluster.add_engine(LLAMACPP_ENGINE, own, gguf, self._load)
        self.llamacpp.add(LLAMACPP_ENGINE)

    # -- lifecycle -------------------------------------------------------------------------

    async def _start(self, tick: bool = True) -> None:
        client_key = generate_key()
        for name, gpu in self.cluster.gpus.items():
            responder = Gb10Responder(
                gpu, self.refresh, old_driver=name in self.options.old_driver_nodes
            )
            self.responders[name] = responder
            self.ssh[name] = await start_ssh_server(
                responder, authorized_client_keys=[client_key], streamer=responder.stream
            )
        if self.options.exporters:
            await self._start_exporters()
        for name, engine in self.cluster.engines.items():
            face = llamacpp.LlamacppServer if name in self.llamacpp else EngineServer
            server = face(engine, self.clock, self.refresh)
            await server.start()
            self.http[name] = server
        client_key.write_private_key(str(self.identity_path))
        os.chmod(self.identity_path, 0o600)
        self.known_hosts_path.write_text(
            "".join(s.known_hosts_line() + "\n" for s in self.ssh.values())
        )
        self.ssh_config_path.write_text("# empty: the simulator's nodes need no ssh config\n")
        self.inventory_path.write_text(self.inventory_yaml())
        self.set_scenario(self.options.scenario)
        if tick:
            self._task = asyncio.create_task(self._tick(), name="sim-tick")

    async def _start_exporters(self) -> None:
        for i, (name, gpu) in enumerate(self.cluster.gpus.items()):
            old = name in self.options.old_driver_nodes
            host = node_address(i)
            self.dcgm[name] = ExporterServer(
                DcgmCollector(gpu, old), self.refresh, host, render=dcgm_text
            )
            self.node_exporter[name] = ExporterServer(
                NodeExporterCollector(gpu), self.refresh, host
            )
        await asyncio.gather(*(s.start() for s in self._exporter_servers()))

    def _exporter_servers(self) -> list[ExporterServer]:
        return [*self.dcgm.values(), *self.node_exporter.values()]

    async def close(self) -> None:
        """Stop every server and the ticking task; remove the directory if it was ours."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.gather(
            *(s.close() for s in self.ssh.values()),
            *(h.close() for h in self.http.values()),
            *(e.close() for e in self._exporter_servers()),
            return_exceptions=True,
        )
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def __aenter__(self) -> SimHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- time and scenarios ----------------------------------------------------------------

    def refresh(self) -> float:
        """Bring the model up to the current simulated time; returns the model's time."""
        self.cluster.advance_to(self.clock.now())
        return self.cluster.now

    def set_scenario(self, name: str) -> None:
        """Switch scenario now: recover from every fault, then play ``name`` from the start."""
        if name not in SCENARIOS:
            raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
        self.refresh()
        self.scenario = name
        self._actions.put_nowait(Act.RECOVER)
        self._player = Player(SCENARIOS[name], self.cluster.now)

    async def step(self) -> None:
        """Bring the model up to now and carry out the scenario's actions that are due (what
        the runner does every ``TICK_WALL_S``; call it yourself when started with
        ``tick=False``)."""
        self.refresh()
        if self._player is not None:
            for act in self._player.due(self.cluster.now):
                self._actions.put_nowait(act)
        while not self._actions.empty():
            await self.apply(self._actions.get_nowait())

    async def _tick(self) -> None:
        while True:
            await self.step()
            await asyncio.sleep(TICK_WALL_S)

    def stream_fault(self, node: str, fault: str) -> None:
        """Play a fault on ``node``'s open ``nvidia-smi -lms`` stream (and later ones):
        ``"stall"`` (it stays open and prints nothing), ``"garbage"`` (its next rows are not
        its CSV), ``"ok"`` (streams print again). A stream open before stays open, so the
        monitor's handling of a stream that goes bad is played, not only of one that starts
        bad (:data:`~sparktop.sim.gb10.LMS_MODES`)."""
        server, responder = self.ssh[node], self.responders[node]
        if fault == "stall":
            server.stall_streams()
        elif fault == "garbage":
            responder.lms = "garbage"
        elif fault == "ok":
            server.resume_streams()
            responder.lms = "ok"
        else:
            raise ValueError(f"stream fault {fault!r}: expected stall, garbage or ok")

    async def apply(self, act: Act) -> None:
        """Carry out one scenario action now."""
        log.info("sim t=%.1f s: %s", self.cluster.now, act)
        t, cluster, engine = self.targets, self.cluster, self.targets.engine
        if act is Act.RECOVER:
            cluster.clear_faults()
            if engine:
                cluster.set_load(engine, self._load)
                cluster.end_flood(engine)
                cluster.set_spec_accept(engine)
            for server in self.ssh.values():
                await server.come_back()
            for page in self._exporter_servers():
                await page.come_back()
        elif act is Act.THERMAL:
            cluster.set_fault(t.thermal, Fault.THERMAL)
        elif act is Act.BLIP:  # on another node than the thermal step's: never a straggler
            cluster.set_fault(t.down, Fault.THERMAL)
        elif act is Act.BLIP_END:
            cluster.set_fault(t.down, Fault.NONE)
        elif act is Act.LOW_POWER:
            cluster.set_fault(t.low_power, Fault.LOW_POWER)
        elif act is Act.STEADY_SLOW:
            cluster.set_fault(t.slow, Fault.STEADY_SLOW)
        elif act is Act.MEMORY_PRESSURE:
            cluster.gpus[t.pressure].host.pressure_rising = True
        elif act is Act.LINK_DOWN:
            cluster.gpus[t.link].host.link_down = True
        elif act is Act.NODE_DOWN:
            await self.ssh[t.down].go_away()
            for pages in (self.dcgm, self.node_exporter):
                if t.down in pages:
                    await pages[t.down].go_away()
        elif act is Act.NODE_UP:
            await self.ssh[t.down].come_back()
            for pages in (self.dcgm, self.node_exporter):
                if t.down in pages:
                    await pages[t.down].come_back()
        elif engine is None:
            return
        elif act is Act.FLOOD:
            cluster.flood(engine)
        elif act is Act.END_FLOOD:
            cluster.end_flood(engine)
        elif act is Act.RESTART:
            cluster.restart(engine)
        elif act is Act.LOAD_SHIFT:
            clients, prompts = LOAD_SHIFT
            cluster.set_load(engine, replace(self._load, clients=clients, prompt_tokens=prompts))
        elif act is Act.LOAD_BACK:
            cluster.set_load(engine, self._load)
        elif act is Act.SPEC_COLLAPSE:
            cluster.set_spec_accept(engine, SPEC_COLLAPSED)
        elif act is Act.STALL:
            cluster.stall(engine)
        elif act is Act.LONG_CONTEXT:
            scenario = SCENARIOS.get(self.scenario)
            tokens = scenario.long_prompt_tokens if scenario else LONG_PROMPT_TOKENS
            cluster.long_context(engine, tokens)

    # -- what to tell the user -------------------------------------------------------------

    def inventory_yaml(self) -> str:
        """The generated inventory (DESIGN.md §3) pointing at this simulator."""
        limits = self.cluster.rates.limits
        node_entries = [
            {
                "name": name,
                "host": "127.0.0.1",
                "port": server.port,
                "user": SSH_USER,
                "known_hosts": str(self.known_hosts_path),
                "identity_file": str(self.identity_path),
                "config": str(self.ssh_config_path),
            }
            for name, server in self.ssh.items()
        ]
        engines: list[dict[str, object]] = [
            {
                "name": name,
                "url": self.http[name].url,
                "nodes": list(self.cluster.groups[name]),
                "max_num_seqs": limits.max_num_seqs,
                "max_num_batched_tokens": limits.max_num_batched_tokens,
            }
            for name in self.cluster.engines
            if name not in self.llamacpp
        ]
        profile = _profile_ref(self.options.profile)
        for name in sorted(self.llamacpp):
            # llama-server states its slots and context (/props), never its KV pool.
            pool = self.cluster.engines[name].limits.kv_pool_tokens
            own = str(_llamacpp_profile(profile, self.directory))
            engines.append(
                {"name": name, "url": self.http[name].url, "kind": "llamacpp",
                 "kv_pool_tokens": pool, "profile": own}
            )  # fmt: skip
        doc: dict[str, object] = {
            "cluster": f"sim-{len(node_entries)}x",
            "profile": profile,
            "interval_s": self.options.interval_s,
            "nodes": node_entries,
            "engines": engines,
        }
        if self.options.alert_hold_s is not None:
            # The stall test counts wall seconds without a token: at --speed X the tour's
            # 35 s stall lasts 35/X of them, so the demo's limit shrinks as its hold does.
            stall = round(Thresholds().stall_s / self.options.speed, 3)
            doc["alerts"] = {"hold_s": self.options.alert_hold_s, "stall_s": stall}
        header = (
            "# Generated by the sparktop simulator; valid while it runs.\n"
            f"# scenario: {self.options.scenario}, speed: {self.options.speed}x\n"
        )
        profile_seqs = self.cluster.rates.profile.max_num_seqs
        if limits.max_num_seqs != profile_seqs:
            header += (
                f"# max_num_seqs {limits.max_num_seqs}, not the profile's {profile_seqs}: "
                "raised so the KV pool can fill (pool-exhaustion)\n"
            )
        if self.options.alert_hold_s is not None:
            header += (
                f"# alerts hold {self.options.alert_hold_s:g} s: the scenario's faults are short\n"
            )
        return header + yaml.safe_dump(doc, sort_keys=False)

    def summary(self) -> str:
        """What was started, one line per server."""
        lines = [f"inventory: {self.inventory_path}"]
        for name, server in self.ssh.items():
            lines.append(f"  node   {name:<10} ssh://{SSH_USER}@127.0.0.1:{server.port}")
        for name, http in self.http.items():
            group = ",".join(self.cluster.groups[name])
            where = "llama.cpp, one host" if name in self.llamacpp else f"TP group {group}"
            lines.append(f"  engine {name:<10} {http.url}  ({where})")
        lines.append(
            f"  scenario {self.scenario}, speed {self.clock.speed:g}x, seed {self.options.seed}"
        )
        return "\n".join(lines)


async def start_sim(
    options: SimOptions | None = None,
    directory: Path | None = None,
    *,
    clock: SimClock | None = None,
    tick: bool = True,
) -> SimHandle:
    """Start a simulator. ``directory`` None = a new temporary one, removed on close.

    ``clock`` replaces the one made from ``options.speed`` (tests drive time by hand);
    ``tick`` False leaves advancing the scenario to :meth:`SimHandle.step`."""
    options = options or SimOptions()
    if options.scenario not in SCENARIOS:
        raise ValueError(
            f"unknown scenario {options.scenario!r}; choose from {', '.join(SCENARIOS)}"
        )
    own = directory is None
    path = Path(tempfile.mkdtemp(prefix="sparktop-sim-")) if directory is None else directory
    path.mkdir(parents=True, exist_ok=True)
    handle = SimHandle(options, path, own, clock)
    try:
        await handle._start(tick)
    except BaseException:
        await handle.close()
        raise
    return handle


def _profile_ref(profile: str) -> str:
    """The profile as the inventory should name it: a built-in name as is, a file path made
    absolute (the inventory resolves relative paths against its own folder, which is not the
    folder ``sparktop sim --profile ./x.yaml`` was started in)."""
    if profile in builtin_profile_names():
        return profile
    path = Path(profile).expanduser()
    return str(path.resolve()) if path.exists() else profile


def _llamacpp_profile(profile: str, directory: Path) -> Path:
    """The simulated llama.cpp engine's own ``profile:``: ``profile`` (a built-in name or a
    file, the one the vLLM engines are read against) copied into ``directory`` as measured
    on llama.cpp, since the simulated llama.cpp engine runs at its figures too (a profile
    naming vLLM rightly gives a llama.cpp engine no expected row)."""
    source = Path(profile) if Path(profile).is_file() else FOLDER / f"{profile}.yaml"
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    doc["engine"] = f"llama.cpp (sparktop sim, at {doc.get('name')}'s figures)"
    doc["name"] = f"{doc.get('name')}-llamacpp"
    path = directory / "llamacpp-profile.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def served_model(profile_model: str) -> dict[str, str]:
    """The model the simulated engines serve for a profile: the profile's model when it is a
    Hugging Face id (``deepseek-ai/DeepSeek-V4-Flash-0731 (304B MoE), …``), else the
    simulator's default (the DeepSeek V4.1 Flash 1017 the other seed profile measured), so
    the simulator serves the model its profile describes."""
    name = profile_model.split(" (")[0].split(",")[0].strip()
    return {"model_name": name} if "/" in name and " " not in name else {}
