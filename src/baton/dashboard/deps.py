"""What the dashboard's routes share (:class:`Deps`), in a module of its own so the route modules
(``pages``, ``actions``, ``sse``) need not import the application that routes to them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.templating import Jinja2Templates

from baton.dashboard.provider import DashboardProvider


@dataclass
class Deps:
    """What the routes share: the provider, the templates, how many pages are open (a stream
    counts as one open page; Spawnea's ``deliveredToRenderer`` reads it), and whether the
    server is stopping (open streams end at once instead of holding the shutdown)."""

    provider: DashboardProvider
    templates: Jinja2Templates
    viewers: int = 0
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
