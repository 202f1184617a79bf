"""The catalogue's ``rumi`` subcommands: ``read``, ``search`` and ``export``."""
