"""The Droid harness (``droid exec`` stream-jsonrpc through ``droid-sdk``): everything of Droid's.

Import the submodules themselves (:mod:`~baton.harnesses.droid.harness` for
:class:`~baton.harnesses.droid.harness.DroidHarness`). This ``__init__`` imports nothing, because
the harness pulls in ``droid_sdk`` (about half a second of imports) and the local-file readers
under :mod:`baton.harnesses.droid.local` must not pay for it.
"""
