"""MCP tool sets, each reproducing a published contract."""
