"""Worker processes and their process groups: spawn, talk over a pipe, cancel, reap."""
