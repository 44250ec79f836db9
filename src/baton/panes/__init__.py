"""Baton's private tmux server: the driver, the pane launcher, the raw-output log, process checks
and secret redaction. Used by the tmux harness and the ACP harness's pane host; knows no agent."""
