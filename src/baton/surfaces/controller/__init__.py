"""The controller surface (``shared/spec/controller-tools.md``): its tools and its run views."""
