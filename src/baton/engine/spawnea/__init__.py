"""The Spawnea surface's engine: tmux roots and children, turns, worktree finalization."""
