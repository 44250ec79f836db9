"""Surface policies: each surface's answers to what the three contracts disagree on.

The engine reads these values and never branches on a surface's name (``WAVE2.md`` §5). One
frozen :class:`SurfacePolicy` per surface:

=================  ====================  ======================  =========================
topic              controller            droid-mcp               spawnea
=================  ====================  ======================  =========================
prompts            ``auto`` (rule)       ``ask`` (caller)        ``screen`` (typed answers)
default autonomy   config default        ``off``                 config default
idempotency        permanent keys        7 days, pending state   daemon epoch
concurrency        tree locks + cap      3 live turns, 1/repo    shared trees allowed
lifetime           per turn              per session             detached (tmux)
text units         UTF-16 code units     UTF-8 bytes             UTF-8 bytes
call deadline      90 s                  60 s                    40 s
=================  ====================  ======================  =========================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from baton.config import Autonomy
from baton.supervisor.wire import Lifetime

SurfaceName: TypeAlias = Literal["controller", "droid-mcp", "spawnea"]
#: ``auto``: a rule answers at once (the controller); ``ask``: prompts wait for the caller
#: (droid-mcp ``droid_respond``); ``screen``: the agent draws its own dialog and the caller types
#: the answer (tmux, Spawnea).
PromptMode: TypeAlias = Literal["auto", "ask", "screen"]


@dataclass(frozen=True, slots=True)
class TreeLocks:
    """A writer needs its whole workspace tree to itself (read-only ``off`` runs share), across
    every Baton process of the user; at most ``max_live`` live sessions (config
    ``maxConcurrentRuns``; None: the old policy, which reads it at admission)."""

    kind: Literal["tree_locks"] = "tree_locks"
    max_live: int | None = None


@dataclass(frozen=True, slots=True)
class RepoSlots:
    """At most ``max_live`` turns running or waiting on a prompt, and ``per_repo`` per repository
    (the nearest ancestor containing ``.git``): ``droid-mcp.md``, "Concurrency limits"."""

    max_live: int = 3
    per_repo: int = 1
    kind: Literal["repo_slots"] = "repo_slots"


@dataclass(frozen=True, slots=True)
class SharedAllowed:
    """Sessions of the surface may share a tree among themselves (Spawnea's ``same-project``
    children, ``WAVE2.md`` decision 7); finalization is guarded separately. To every other
    surface each live session is a writer holding its tree (``Engine.claim_tree``)."""

    kind: Literal["shared"] = "shared"


ConcurrencyRule: TypeAlias = TreeLocks | RepoSlots | SharedAllowed


@dataclass(frozen=True, slots=True)
class Permanent:
    """A key replays its run forever, also after restarts; different arguments conflict."""

    kind: Literal["permanent"] = "permanent"


@dataclass(frozen=True, slots=True)
class Expiring:
    """Keys are pending before the action and kept ``days`` days (``droid-mcp.md``,
    "Idempotency keys")."""

    days: int = 7
    kind: Literal["expiring"] = "expiring"


@dataclass(frozen=True, slots=True)
class ProcessEpoch:
    """Keys replay only within the daemon instance that recorded them (Spawnea bootstrap)."""

    kind: Literal["epoch"] = "epoch"


IdempotencyRule: TypeAlias = Permanent | Expiring | ProcessEpoch


@dataclass(frozen=True, slots=True, kw_only=True)
class SurfacePolicy:
    """One surface's rules, read by the engine (see the module docstring)."""

    name: SurfaceName
    prompts: PromptMode
    default_autonomy: Literal["off", "low", "medium", "high", "config"]
    """``config`` means the host's ``defaultAutonomy``."""
    spec_when_off: bool
    """Autonomy ``off`` runs Droid in Spec mode (read-only) rather than Auto mode asking."""
    idempotency: IdempotencyRule
    concurrency: ConcurrencyRule
    lifetime: Lifetime
    text_units: Literal["utf16", "utf8"]
    max_call_s: float
    """The longest a tool call of this surface may legitimately take (HTTP deadline floor)."""
    events_kept: int
    """Events kept per live session for cursor reads (``droid_wait``, ``get_turn``)."""


CONTROLLER = SurfacePolicy(
    name="controller",
    prompts="auto",
    default_autonomy="config",
    spec_when_off=True,
    idempotency=Permanent(),
    concurrency=TreeLocks(),
    lifetime="per_turn",
    text_units="utf16",
    max_call_s=90.0,
    events_kept=1000,
)

DROID_MCP = SurfacePolicy(
    name="droid-mcp",
    prompts="ask",
    default_autonomy="off",
    spec_when_off=False,
    idempotency=Expiring(days=7),
    concurrency=RepoSlots(max_live=3, per_repo=1),
    lifetime="per_session",
    text_units="utf8",
    max_call_s=60.0,
    events_kept=1000,
)

SPAWNEA = SurfacePolicy(
    name="spawnea",
    prompts="screen",
    default_autonomy="config",
    spec_when_off=False,
    idempotency=ProcessEpoch(),
    concurrency=SharedAllowed(),
    lifetime="detached",
    text_units="utf8",
    max_call_s=40.0,
    events_kept=1000,
)

POLICIES: dict[str, SurfacePolicy] = {p.name: p for p in (CONTROLLER, DROID_MCP, SPAWNEA)}


# -- the policy seam the runtime reads (docs/architecture.md §3.3) -------------------------------
# Beside the old values above until P5 switches the services over; the old ``SurfacePolicy``,
# ``PromptMode``, ``SharedAllowed``, ``ProcessEpoch`` and the three constants are removed by P7.
# The values live in each surface's ``policy.py`` (P5), resolved from the config at build time.


@dataclass(frozen=True, slots=True, kw_only=True)
class DecideAtOnce:
    """The controller's rule (``controller.md``, "Autonomy" and "Questions"), answered at once:
    a question is declined; a permission the agent marks ``needs_human`` is declined; at session
    autonomy ``approve_once_at`` or above, a permission offering an ``allow_once`` option is
    allowed with it; anything else is declined. Declines are recorded on the turn."""

    approve_once_at: Autonomy = "high"


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldForCaller:
    """Prompts wait for a caller's answer (droid-mcp ``droid_respond``, Spawnea
    ``send_prompt``).

    ``expires_after_s``: an unanswered prompt is declined (``by="expiry"``) after it; None:
    never. ``persistent``: whether a TUI's own dialog offers its persistent options
    (``as_offered``, Spawnea) or hides them (``never``); a structured permission never offers
    them (``session/prompts.py``). ``autonomy_cap``: an ``allow_at_autonomy`` option is offered
    only when its level is within it (config ``maxAutonomy``). A ``reject`` is always offered.
    """

    expires_after_s: float | None
    persistent: Literal["never", "as_offered"] = "never"
    autonomy_cap: Autonomy = "high"


PromptRule: TypeAlias = DecideAtOnce | HoldForCaller


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedTrees:
    """Sessions of one ``family`` share trees among themselves (Spawnea's same-project
    children, ``WAVE2.md`` decision 7); to everyone else each is a writer holding its tree
    until it is gone. No capacity limit."""

    family: str


@dataclass(frozen=True, slots=True)
class DaemonLifetime:
    """Keys live in memory for this engine's lifetime (its epoch); an exact retry while the first
    attempt runs shares that attempt (Spawnea)."""

    kind: Literal["daemon_lifetime"] = "daemon_lifetime"


AdmissionRule: TypeAlias = TreeLocks | RepoSlots | SharedTrees
KeyRule: TypeAlias = Permanent | Expiring | DaemonLifetime
SessionLifetime = Literal["per_turn", "per_session", "detached"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPolicy:
    """One surface's rules as the runtime reads them (``docs/architecture.md`` §3.3). The engine
    never compares a policy or its ``name``: it reads the rule values.

    ``name`` is written to the store's surface column. ``prompts`` is read by
    ``engine/runtime/prompts.py``; ``default_autonomy`` (resolved from the config) by the
    services; ``idempotency`` by ``engine/keys.py``; ``concurrency`` by ``engine/admission.py``;
    ``lifetime`` by the runtime (``per_turn``: closed after its one turn; ``per_session``:
    closed at shutdown; ``detached``: detached at shutdown) and recovery; ``max_call_s`` by the
    surface server (HTTP deadline); ``events_kept`` by each session's event log.
    """

    name: SurfaceName
    prompts: PromptRule
    default_autonomy: Autonomy
    idempotency: KeyRule
    concurrency: AdmissionRule
    lifetime: SessionLifetime
    max_call_s: float
    events_kept: int = 1000
