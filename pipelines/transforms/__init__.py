"""The Beam transforms of ``rumi convert``, one module per step of the conversion.

In pipeline order: :mod:`~pipelines.transforms.discover` (inputs to scene
references), :mod:`~pipelines.transforms.read_metadata` (scenes),
:mod:`~pipelines.transforms.plan_cubes` (cube plans),
:mod:`~pipelines.transforms.compress` (frame units, codecs, compressed
frames), :mod:`~pipelines.transforms.frames` (frame keys, windowed reads),
:mod:`~pipelines.transforms.write_parts` (part files),
:mod:`~pipelines.transforms.cube_parts` (the frames' places, per cube),
:mod:`~pipelines.transforms.assemble_files` and
:mod:`~pipelines.transforms.assemble_bucket` (files, after
:mod:`~pipelines.transforms.verify`), :mod:`~pipelines.transforms.manifest`,
:mod:`~pipelines.transforms.dead_letters` and
:mod:`~pipelines.transforms.publish` (the run's outputs);
:mod:`~pipelines.transforms.collect` gathers a PCollection in one place and
counts what flows through each step, and every step is a dataclass
:class:`~pipelines.transforms.base.DataclassPTransform`.
"""
