"""Waiting for work whose outcome we drop, without ever swallowing our own cancellation.

``with contextlib.suppress(asyncio.CancelledError): await task`` after ``task.cancel()`` also
swallows a cancellation of the *waiting* task that arrives meanwhile (shutdown, a caller that
gave up), which then runs on as if nothing happened. These helpers tell the two apart with
``Task.cancelling()`` (Python 3.11): the awaited work's cancellation or failure is dropped, a
pending cancellation of the current task is raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

log = logging.getLogger(__name__)


def _we_are_cancelled() -> bool:
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0


async def settle(work: Awaitable[Any]) -> None:
    """Await ``work`` and drop its result, its exception or its own cancellation.

    Raises
    ------
    asyncio.CancelledError
        Only if the current task itself is being cancelled.
    """
    try:
        await work
    except asyncio.CancelledError:
        if _we_are_cancelled():
            raise
    except Exception:
        log.debug("dropped the failure of settled work", exc_info=True)


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has finished (see :func:`settle`)."""
    task.cancel()
    await settle(task)
