"""The Droid harness (``droid exec`` stream-jsonrpc through ``droid-sdk``)."""

from baton.harnesses.droid.harness import DroidHarness
from baton.harnesses.droid.session import DroidSession

__all__ = ["DroidHarness", "DroidSession"]
