"""Adapters that speak one agent's protocol behind one small interface."""
