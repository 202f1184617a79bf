"""The pure planning of ``rumi convert``: no Beam, no pixels.

:mod:`~pipelines.planning.scene` describes a scene from its metadata,
:mod:`~pipelines.planning.timestamps` finds its acquisition time,
:mod:`~pipelines.planning.bands` names its bands
(both from :func:`~pipelines.planning.hrefs.href_path`),
:mod:`~pipelines.planning.lattice` snaps extents to a common lattice,
:mod:`~pipelines.planning.grouping` groups scenes into cubes,
:mod:`~pipelines.planning.plan` is one cube's plan (layout, georeferencing,
trailer) and :mod:`~pipelines.planning.codec_choice` picks its frame unit
and codec.
"""
