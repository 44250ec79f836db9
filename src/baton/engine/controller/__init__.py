"""The controller's service: runs addressed by ``runId`` (``controller.md``,
``controller-tools.md``)."""
