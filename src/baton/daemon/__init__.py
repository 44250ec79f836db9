"""``baton daemon``: one long-lived host for every surface, reached through a Unix-socket gateway.

Modules:

- :mod:`baton.daemon.host`: :class:`~baton.daemon.host.Daemon` (owner lock, store, engine,
  gateway, admin API, HTTP listener, dashboard hook, shutdown);
- :mod:`baton.daemon.seam`: how a surface plugs in (:class:`~baton.daemon.seam.GatewaySurface`,
  :class:`~baton.daemon.seam.DaemonServices`, :data:`~baton.daemon.seam.PLUGINS`);
- :mod:`baton.daemon.gateway`: authentication and one MCP server per connection;
- :mod:`baton.daemon.runtime_file`: where the gateway lives, the runtime descriptor, staleness;
- :mod:`baton.daemon.admin`, :mod:`baton.daemon.admin_client`: the operator's API and
  ``baton approvals``; :mod:`baton.daemon.approvals`: finalization approvals over
  :mod:`baton.git`;
- :mod:`baton.daemon.launch`: finding or starting the daemon for ``baton bridge``
  (:mod:`baton.daemon.bridge`);
- :mod:`baton.daemon.dashboard`: the dashboard's mount point.

``docs/daemon.md`` describes the commands, files and protocols.
"""
