"""asv: the IMM tracker (motion="imm", issue 18) against constant velocity, same run.

Goals (N = 1,000): manoeuvring scenario IMM GOSPA >= 25 % lower than CV and
ID switches at most half of CV's; IMM (3 models) tick <= 3x the CV tick;
straight-line scenario IMM GOSPA within 3 % of CV; zero allocations per
tick. The numbers come from dod.tracker.bench_imm.measure (the table of
``python -m dod.tracker.bench --imm``). Skipped (NotImplementedError) on
commits without motion="imm".
"""
from ._util import management, openmp_env, require

openmp_env()        # before the engine loads libgomp, as the bench and the demo

N = 1000
SCANS = 150


def _need():
    cfg = require("dod.tracker.config")
    if not hasattr(cfg.TrackerConfig, "motion"):      # a field (a class default) or, since the parts, a property
        raise NotImplementedError("motion='imm' not in this commit")
    return require("dod.tracker.bench_imm")


class TrackerIMMTick:
    """One steady-state tick at N = 1,000 on the manoeuvring scenario (cv, imm)."""

    params = ["cv", "imm"]
    param_names = ["motion"]
    number = 1
    repeat = 15
    warmup_time = 0
    timeout = 300

    def setup(self, motion):
        _need()
        from dod.tracker import Tracker, TrackerConfig
        from dod.tracker.scenario import PRESET_CONFIG, PRESETS, generate

        self.sc = generate(N, 41, seed=0, **PRESETS["manoeuvre"])
        self.t = Tracker(TrackerConfig(motion=motion, capacity=4 * N, max_detections=2 * N + 64,
                                       **management(TrackerConfig), **PRESET_CONFIG["manoeuvre"]))
        for z in self.sc.detections[:40]:
            self.t.tick(z, self.sc.dt)
        self.z = self.sc.detections[40]

    def time_tick(self, motion):
        self.t.tick(self.z, self.sc.dt)


class TrackerIMMGoals:
    """The issue's ratios, every tracker on the same scans in one run."""

    timeout = 900

    def setup_cache(self):
        try:
            bench = _need()
        except NotImplementedError:
            return {"missing": True}
        out = {}
        for sc in ("manoeuvre", "straight"):
            for m, r in bench.measure(N, sc, ("cv", "imm"), scans=SCANS, warmup=20).items():
                out[(sc, m)] = r
        return out

    def setup(self, data):
        if "missing" in data:
            raise NotImplementedError("motion='imm' not in this commit")

    # Every goal here is a ceiling (asv_bench/plot_history.py: only *speedup* goals are floors).
    def track_manoeuvre_gospa_ratio(self, data):
        """GOSPA imm / cv on the manoeuvring scenario (goal <= 0.75: >= 25 % lower)."""
        return data[("manoeuvre", "imm")]["gospa"] / data[("manoeuvre", "cv")]["gospa"]
    track_manoeuvre_gospa_ratio.unit = "x"
    track_manoeuvre_gospa_ratio.goal = 0.75

    def track_manoeuvre_switch_ratio(self, data):
        """ID switches imm / cv on the manoeuvring scenario (goal <= 0.5; commits before
        metrics.clear_mot need motmetrics)."""
        a, b = data[("manoeuvre", "imm")]["switches"], data[("manoeuvre", "cv")]["switches"]
        if a is None:
            raise NotImplementedError("motmetrics is not installed")
        return a / max(1, b)
    track_manoeuvre_switch_ratio.unit = "x"
    track_manoeuvre_switch_ratio.goal = 0.5

    def track_tick_ratio(self, data):
        """Median tick (thread CPU) imm / cv on the manoeuvring scenario (goal <= 3)."""
        return data[("manoeuvre", "imm")]["cpu50"] / data[("manoeuvre", "cv")]["cpu50"]
    track_tick_ratio.unit = "x"
    track_tick_ratio.goal = 3.0

    def track_straight_gospa_ratio(self, data):
        """GOSPA imm / cv on the straight-line scenario (goal <= 1.03)."""
        return data[("straight", "imm")]["gospa"] / data[("straight", "cv")]["gospa"]
    track_straight_gospa_ratio.unit = "x"
    track_straight_gospa_ratio.goal = 1.03

    def track_imm_blocks_kept(self, data):
        """Python blocks the IMM's timed ticks kept, both scenarios (goal 0)."""
        return data[("manoeuvre", "imm")]["kept_blocks"] + data[("straight", "imm")]["kept_blocks"]
    track_imm_blocks_kept.unit = "blocks"
    track_imm_blocks_kept.goal = 0
