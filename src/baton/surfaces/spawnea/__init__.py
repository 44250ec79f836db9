"""The Spawnea surface (``shared/spec/spawnea-control-api.md``), served by the daemon."""
