"""The ``rumi`` command line: one module per subcommand, registered as entry points."""
