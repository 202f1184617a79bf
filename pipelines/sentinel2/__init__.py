"""Sentinel-2: what ``rumi convert`` knows about this one product, from STAC items and from SAFE folders.

* :mod:`pipelines.sentinel2.bands`: the band table (ids, common names, wavelengths per
  platform, resolution groups) and the asset keys of Earth Search, the Planetary
  Computer and CDSE.
* :mod:`pipelines.sentinel2.items`: recognising L2A items by their properties,
  radiometry per processing baseline, the newest processing of each datatake, and the
  scene references (with their cube family) the pipeline converts.
* :mod:`pipelines.sentinel2.safe`: the radiometry a SAFE product's metadata file gives its
  images (JP2, or GeoTIFF converted in place), for SAFE folders converted as files.
* :mod:`pipelines.sentinel2.products`: the datatake and processing a product's name
  (SAFE, Earth Search) gives its files, so that of local files too the newest processing is kept.
* :mod:`pipelines.sentinel2.search`: a STAC API search through pystac-client.
* :mod:`pipelines.sentinel2.incremental`: nightly runs against the catalogue's state.
* :mod:`pipelines.sentinel2.testing`: a small archive of COGs and items for tests.
"""
