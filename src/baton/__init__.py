"""Baton: an MCP server through which one coding agent hands tasks to other agents."""

from __future__ import annotations

__version__ = "0.1.0"
