"""Finding the processes a test's server left behind, by a marker in their environment."""

from __future__ import annotations

import time

import psutil


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Live (non-zombie) processes whose environment has ``BATON_TEST_TAG=<tag>``."""
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("BATON_TEST_TAG") == tag:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_until_gone(tag: str, timeout_s: float) -> list[psutil.Process]:
    """Poll until no tagged process is left; return the survivors (empty on success)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = tagged_processes(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def pid_alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def kill_tagged(tag: str) -> None:
    """Last-resort cleanup so a failing test never leaks processes."""
    for proc in tagged_processes(tag):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
