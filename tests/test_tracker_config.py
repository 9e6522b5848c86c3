"""TrackerConfig in parts: FilterConfig, ManagementConfig, ClutterConfig,
LimitsConfig and ExecutionConfig, each checking its own fields, and the
flat keywords and attributes of before (TrackerConfig(gate_probability=...),
config.threads, dataclasses.replace(config, **flat))."""
import copy
import dataclasses
import math
import os
import pickle

import numpy as np
import pytest

from dod.tracker import (ClutterConfig, ExecutionConfig, FilterConfig, LimitsConfig, ManagementConfig, Tracker,
                         TrackerConfig)
from dod.tracker.config import FLAT_FIELDS, MAX_THREADS, PARTS, chi2_ppf

# Every flat field and its default, written out: the defaults must not move.
DEFAULTS = dict(
    dim=2, q=1.0, r=1.0, v0=10.0, gate_probability=0.999, motion="cv", imm_q=(1.0, 20.0), turn_q=1.0,
    turn_rate_q=0.01, turn_rate_v0=0.2,
    imm_transition=((0.90, 0.05, 0.05), (0.05, 0.90, 0.05), (0.05, 0.05, 0.90)), imm_mu0=(0.8, 0.1, 0.1),
    imm_rates=None,
    confirmation="score", initiation="two_point", confirm_m=3, confirm_n=5, max_misses=5, pd=0.9,
    new_target_density=1e-6, false_track_probability=1e-3, track_loss_probability=1e-2, score_drop=11.0,
    v_max=50.0,
    clutter_density=None, surveillance_volume=None, clutter_smoothing=0.1,
    capacity=20000, max_detections=30000, overflow="error", max_cluster=0, out_of_sequence="refuse",
    threads=1, parallel_min_rows=512, sort_every=0, sort_when_mixed=0.1, sort_when_displaced=0.2,
    sort_when_drifted=2.0, confirmed_first=True, events=False, layout="lanes", dtype="float64")

# A value other than the default for every field (each valid on its own).
OTHER = dict(
    dim=3, q=0.5, r=2.0, v0=7.0, gate_probability=0.99, motion="imm", imm_q=(2.0, 30.0), turn_q=0.5,
    turn_rate_q=0.02, turn_rate_v0=0.1,
    imm_transition=((0.98, 0.01, 0.01), (0.01, 0.98, 0.01), (0.01, 0.01, 0.98)), imm_mu0=(0.6, 0.2, 0.2),
    imm_rates=((-0.2, 0.1, 0.1), (0.3, -0.6, 0.3), (0.05, 0.15, -0.2)),
    confirmation="m_of_n", initiation="single", confirm_m=2, confirm_n=4, max_misses=7, pd=0.8,
    new_target_density=1e-5, false_track_probability=1e-2, track_loss_probability=1e-3, score_drop=9.0,
    v_max=40.0,
    clutter_density=1e-4, surveillance_volume=1e6, clutter_smoothing=0.5,
    capacity=300, max_detections=200, overflow="drop", max_cluster=12, out_of_sequence="drop",
    threads=2, parallel_min_rows=16, sort_every=5, sort_when_mixed=0.3, sort_when_displaced=0.0,
    sort_when_drifted=0.0, confirmed_first=False, events=True, layout="rows", dtype="float32")


def test_every_field_is_in_exactly_one_part_with_todays_default():
    assert set(FLAT_FIELDS) == set(DEFAULTS) == set(OTHER)
    assert [f.name for f in dataclasses.fields(TrackerConfig)] == list(PARTS)
    # (tests/conftest.py moves these two defaults under DOD_TEST_TRACKER_THREADS)
    moved = {"threads", "parallel_min_rows"} if os.environ.get("DOD_TEST_TRACKER_THREADS") else set()
    cfg = TrackerConfig()
    for name, default in DEFAULTS.items():
        assert PARTS[FLAT_FIELDS[name]].__dataclass_fields__[name].default == default, name
        part = getattr(cfg, FLAT_FIELDS[name])
        assert isinstance(part, PARTS[FLAT_FIELDS[name]])
        if name not in moved:
            assert getattr(part, name) == default and getattr(cfg, name) == default, name


def test_parts_and_flat_keywords_make_the_same_config():
    flat = TrackerConfig(**OTHER)
    parts = TrackerConfig(**{p: cls(**{n: v for n, v in OTHER.items() if FLAT_FIELDS[n] == p})
                             for p, cls in PARTS.items()})
    assert flat == parts and hash(flat) == hash(parts)
    for name, v in OTHER.items():
        assert getattr(flat, name) == v and getattr(getattr(flat, FLAT_FIELDS[name]), name) == v, name
    assert flat != TrackerConfig()
    assert flat.gate == parts.filter.gate == chi2_ppf(0.99, 3)
    assert flat.pair_radius_factor == math.sqrt(2.0 * flat.gate)
    assert flat.confirm_threshold == math.log((1.0 - 1e-3) / 1e-2) == parts.management.confirm_threshold
    assert flat.delete_threshold == math.log(1e-3 / (1.0 - 1e-2)) == parts.management.delete_threshold


def test_flat_keywords_mix_with_parts_and_win_over_the_same_field():
    cfg = TrackerConfig(filter=FilterConfig(dim=3, r=2.0), execution=ExecutionConfig(threads=4), threads=2, q=3.0)
    assert (cfg.dim, cfg.r, cfg.q, cfg.threads) == (3, 2.0, 3.0, 2)
    assert cfg.filter == FilterConfig(dim=3, r=2.0, q=3.0)
    assert cfg.execution == ExecutionConfig(threads=2)
    assert cfg.management == ManagementConfig() and cfg.limits == LimitsConfig() and cfg.clutter == ClutterConfig()


def test_dataclasses_replace_takes_flat_keywords_and_parts():
    base = TrackerConfig(dim=3, confirmation="score", threads=2)
    r = dataclasses.replace(base, threads=3, pd=0.7)
    assert (r.threads, r.pd, r.dim, r.confirmation) == (3, 0.7, 3, "score")
    assert (base.threads, base.pd) == (2, 0.9)                       # frozen: the original is as it was
    r = dataclasses.replace(base, limits=LimitsConfig(capacity=99))
    assert r.capacity == 99 and r.dim == 3 and r.threads == 2
    assert dataclasses.replace(base) == base
    with pytest.raises(ValueError, match="threads"):
        dataclasses.replace(base, threads=0)
    with pytest.raises(TypeError, match="gate_probability"):
        dataclasses.replace(base, gate_probabilty=0.9)


def test_a_keyword_that_names_no_field_raises_type_error_listing_them():
    with pytest.raises(TypeError) as e:
        TrackerConfig(gate_probabilty=0.99)
    msg = str(e.value)
    assert "'gate_probabilty'" in msg
    for name in list(FLAT_FIELDS) + list(PARTS):
        assert name in msg
    with pytest.raises(TypeError, match="gate"):
        Tracker(gate=3.0)                       # a derived property, not a field
    with pytest.raises(TypeError):
        FilterConfig(threads=2)                 # a part takes its own fields only
    with pytest.raises(TypeError):
        TrackerConfig(FilterConfig())           # parts are keywords


@pytest.mark.parametrize("part", list(PARTS))
def test_a_part_of_the_wrong_type_raises_type_error_naming_it(part):
    for bad in (ExecutionConfig() if part != "execution" else FilterConfig(), {}, "x", 1):
        with pytest.raises(TypeError, match=part):
            TrackerConfig(**{part: bad})


def test_frozen_compared_hashed_copied_and_pickled():
    cfg = TrackerConfig(**OTHER)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.threads = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.execution = ExecutionConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.filter.dim = 2
    for twin in (copy.copy(cfg), copy.deepcopy(cfg), pickle.loads(pickle.dumps(cfg))):
        assert twin == cfg and hash(twin) == hash(cfg) and twin.threads == 2
    assert len({TrackerConfig(), TrackerConfig(), cfg}) == 2
    ns = dict(TrackerConfig=TrackerConfig, **{cls.__name__: cls for cls in PARTS.values()})
    assert eval(repr(cfg), ns) == cfg
    assert dataclasses.asdict(cfg)["execution"]["threads"] == 2


def test_lists_and_arrays_are_frozen_into_tuples():
    q = [2.0, 30.0]
    trans = [[0.98, 0.01, 0.01], [0.01, 0.98, 0.01], [0.01, 0.01, 0.98]]
    cfg = TrackerConfig(motion="imm", imm_q=q, imm_transition=trans, imm_mu0=np.array([0.6, 0.2, 0.2]))
    q[0] = -1.0                                 # the caller's list changes after the checks
    trans[0][0] = 5.0
    assert cfg.imm_q == (2.0, 30.0)
    assert cfg.imm_transition == ((0.98, 0.01, 0.01), (0.01, 0.98, 0.01), (0.01, 0.01, 0.98))
    assert cfg.imm_mu0 == (0.6, 0.2, 0.2) and all(type(x) is float for x in cfg.imm_mu0)
    hash(cfg)
    assert cfg == TrackerConfig(motion="imm", imm_q=(2.0, 30.0), imm_transition=cfg.imm_transition,
                                imm_mu0=(0.6, 0.2, 0.2))


# field: values each part must refuse with ValueError naming the field
BAD = {
    "dim": [1, 4, 2.0, "2", True, None],
    "q": [0.0, -1.0, math.nan, math.inf, True, "1", None, 10**400],
    "r": [0, -2.0, math.nan],
    "v0": [0.0, math.inf],
    "gate_probability": [0.0, 1.0, math.nan, "0.9", None],
    "motion": ["ct", None, 1],
    "imm_q": [(0.0, 1.0), (1.0,), "ab", None, (1.0, math.nan)],
    "turn_q": [0.0, True],
    "turn_rate_q": [-1e-3],
    "turn_rate_v0": [math.nan],
    "imm_transition": [((0.5, 0.5), (0.5, 0.5)), "abc", None],
    "imm_mu0": [(0.5, 0.5, 0.5), (1.0, 0.0)],
    "imm_rates": [((-0.1, 0.1, 0.0),) * 3, ((0.1, -0.1, 0.0), (0.0,) * 3, (0.0,) * 3), "fast", 1.0,
                  ((math.nan, 0.0, 0.0),) * 3],
    "confirmation": ["wald", None, ["score"]],
    "initiation": ["three_point", None],
    "confirm_m": [0, 6, 3.5, True, None],          # 6 > confirm_n = 5
    "confirm_n": [0, 33, 2, 5.0],                  # 2 < confirm_m = 3
    "max_misses": [0, -1, 1 << 32, 2.5, None],
    "pd": [0.0, 1.0, math.nan],
    "new_target_density": [0.0, math.inf],
    "false_track_probability": [0.0, 0.5],
    "track_loss_probability": [0.5, -0.1],
    "score_drop": [0.0, math.inf],
    "v_max": [0.0, math.nan],
    "clutter_density": [0.0, -1.0, math.inf, "1"],
    "surveillance_volume": [0.0, math.inf],
    "clutter_smoothing": [0.0, 1.5, None],
    "capacity": [0, -1, (1 << 24) + 1, 5.5, "10", None, 10**30],
    "max_detections": [0, (1 << 24) + 1, 1.0],
    "overflow": ["wrap", None],
    "max_cluster": [-1, 1 << 31, 2.0],
    "out_of_sequence": ["retrodict", None, "Refuse"],
    "threads": [0, MAX_THREADS + 1, 1.5, True, "2", None],
    "parallel_min_rows": [-1, 1 << 31, 1.0, None],
    "sort_every": [-1, 1.0, True, 1 << 31],
    "sort_when_mixed": [-0.1, 1.5, math.nan, None],
    "sort_when_displaced": [1.01, "0.2"],
    "sort_when_drifted": [-0.1, math.inf, math.nan, 10**400],
    "confirmed_first": [0, 1, None, "yes", np.bool_(True)],
    "events": [0, 1, None, "yes", np.bool_(True)],
    "layout": ["columns", "F", "", None, 1],
    "dtype": ["float16", "f4", "double", "", None, 1, float, np.int32, np.dtype("float16"), np.dtype(">f4")],
}


def test_dtype_takes_numpys_float64_and_float32_and_stores_the_string():
    for given, name in ((np.float32, "float32"), (np.dtype("float32"), "float32"), (np.dtype("<f4"), "float32"),
                        (np.float64, "float64"), (np.dtype(np.float64), "float64"), ("float32", "float32")):
        cfg = TrackerConfig(dtype=given)
        assert cfg.dtype == name and type(cfg.dtype) is str and cfg.filter.dtype == name
        assert cfg == TrackerConfig(dtype=name) and hash(cfg) == hash(TrackerConfig(dtype=name))
        assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_every_field_has_bad_values_here():
    assert set(BAD) == set(FLAT_FIELDS)


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_values_raise_value_error_naming_the_field_before_anything_is_built(name):
    cls = PARTS[FLAT_FIELDS[name]]
    for bad in BAD[name]:
        with pytest.raises(ValueError, match=name):
            cls(**{name: bad})
        with pytest.raises(ValueError, match=name):
            TrackerConfig(**{name: bad})
        with pytest.raises(ValueError, match=name):
            dataclasses.replace(TrackerConfig(), **{name: bad})
    # and each part takes the other value of OTHER (checked independently of the others)
    good = {name: OTHER[name]}
    if name == "confirm_m":
        good["confirm_n"] = 5
    assert getattr(cls(**good), name) == OTHER[name]


def test_bad_values_raise_through_the_tracker_too():
    # Tracker(**overrides) builds the config first: nothing of the tracker exists yet
    for name in ("dim", "capacity", "threads", "max_misses", "imm_transition"):
        with pytest.raises(ValueError, match=name):
            Tracker(**{name: BAD[name][-2]})


def test_integers_of_other_types_are_taken_and_read_back_as_given():
    cfg = TrackerConfig(dim=np.int64(3), capacity=np.int32(100), threads=np.uint8(2), max_misses=np.int64(9),
                        q=np.float64(0.5))
    assert (cfg.dim, cfg.capacity, cfg.threads, cfg.max_misses, cfg.q) == (3, 100, 2, 9, 0.5)
    assert TrackerConfig(max_misses=(1 << 32) - 1).max_misses == (1 << 32) - 1
    t = Tracker(cfg)
    assert t.threads == 2 and t.table.capacity == 100 and t.config is cfg


def test_the_tracker_keeps_the_config_and_applies_overrides():
    cfg = TrackerConfig(dim=3, confirmation="score")
    assert Tracker(cfg).config is cfg
    t = Tracker(cfg, threads=2, capacity=64)
    assert t.config == dataclasses.replace(cfg, threads=2, capacity=64)
    assert t.threads == 2 and t.table.capacity == 64 and t.config.confirmation == "score"
    with pytest.raises(TypeError, match="TrackerConfig"):
        Tracker(cfg.filter)


def _scans(seed=5, n=60, scans=25):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 500, (n, 2))
    vel = rng.normal(0, 5, (n, 2))
    for _ in range(scans):
        pos += vel * 0.1
        seen = pos[rng.random(n) < 0.9]
        yield np.ascontiguousarray(np.vstack([seen + rng.normal(0, 1, seen.shape),
                                              rng.uniform(0, 500, (rng.poisson(5), 2))]))


def test_a_config_in_parts_tracks_as_the_same_flat_config():
    flat = TrackerConfig(r=1.5, confirmation="score", initiation="two_point", clutter_density=1e-4,
                         capacity=400, max_detections=200, sort_every=7)
    parts = TrackerConfig(filter=FilterConfig(r=1.5),
                          management=ManagementConfig(confirmation="score", initiation="two_point"),
                          clutter=ClutterConfig(clutter_density=1e-4),
                          limits=LimitsConfig(capacity=400, max_detections=200),
                          execution=ExecutionConfig(sort_every=7))
    a, b = Tracker(flat), Tracker(parts)
    for z in _scans():
        a.tick(z, 0.1)
        b.tick(z, 0.1)
    assert a.count == b.count > 0
    for name, col in a.columns().items():
        assert np.array_equal(col, b.columns()[name]), name
