"""Droid's files on this machine (``~/.factory``): the session index and its records, transcript
lines and tails, user settings, resume guards and full-text search. No ``droid_sdk``, no process."""
