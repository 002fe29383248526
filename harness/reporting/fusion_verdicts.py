"""`compare`'s fusion verdicts: each fusion pair (the same cell with fusion on and off, both valid) of either
bundle, with its speedup, interval and verdict in A and in B (harness/stats/intervals.py), whether the two
verdicts agree and whether the two intervals overlap. A pair of one round has no verdict: it agrees
with nothing. A pair whose cells ran unlike in A and in B (other math modes, hardware, share, torch
threads or `env:` values: `pairing.unlike_runs`, the rule compare pairs its cells by) is not set
against itself: each side's speedup is shown, with why they are not compared. But where the hardware
alone sets them apart (`pairing.RunsApart.only_hardware`: a lab reproducing a run on its own machine),
each bundle's verdict was reached on one machine, so whether the two verdicts agree is asked
(`agree_across_hardware`); whether the intervals overlap is not, since how large a speedup is
depends on the machine. They inform, as the other figures do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.bundle.reader import LoadedBundle
from harness.reporting.cell_rows import bundle_rows
from harness.reporting.fusion_pairs import FusionPair, fusion_pairs, pairs_apart
from harness.reporting.pairing import pairing_key, runs_apart
from harness.stats.intervals import NO_INTERVAL, Interval, Speedup


@dataclass
class FusionVerdict:
    """One fusion pair in both bundles: its speedup in each, None where the pair is not valid there or
    its cells ran apart there (`apart_a`/`apart_b` say why: `run_facts.apart`); `unlike` says why
    the two bundles' cells of the pair cannot be set side by side (`pairing.unlike_runs`), "" where they can;
    `across_hardware` that only their machines differ (`pairing.RunsApart.only_hardware`)."""

    name: str
    a: Speedup | None
    b: Speedup | None
    apart_a: str = ""
    apart_b: str = ""
    unlike: str = ""
    across_hardware: bool = False

    @property
    def both_verdicts(self) -> bool:
        """Both bundles gave the pair a verdict (more than one round each, not all alike)."""
        return (self.a is not None and self.b is not None
                and self.a.verdict not in NO_INTERVAL and self.b.verdict not in NO_INTERVAL)

    @property
    def judged(self) -> bool:
        """Both bundles gave the pair a verdict, of cells that ran alike."""
        return self.both_verdicts and not self.unlike

    @property
    def agree(self) -> bool:
        return self.judged and self.a is not None and self.b is not None and self.a.verdict == self.b.verdict

    @property
    def judged_across_hardware(self) -> bool:
        """Both bundles gave the pair a verdict, A's cells and B's apart in their machines alone."""
        return self.both_verdicts and self.across_hardware

    @property
    def agree_across_hardware(self) -> bool:
        """Fusion's verdict reproduced on the other machine: the same verdict in both (`faster`, `under 5%`, ...)."""
        return (self.judged_across_hardware and self.a is not None and self.b is not None
                and self.a.verdict == self.b.verdict)

    @property
    def direction_agrees_across_hardware(self) -> bool:
        """Fusion's direction reproduced on the other machine: both intervals on one side of 1, or both
        holding it (`Speedup.direction`), whatever the verdicts' words: `faster` on one machine and
        `under 5%` above 1 on the other both found fusion helped, which the words' agreement reads `no`."""
        return (self.judged_across_hardware and self.a is not None and self.b is not None
                and self.a.direction == self.b.direction)

    @property
    def intervals(self) -> tuple[Interval, Interval] | None:
        """Both bundles' intervals, where both have one (more than one round each) of cells that ran alike."""
        a, b = (self.a.interval if self.a else None), (self.b.interval if self.b else None)
        return None if a is None or b is None or self.unlike else (a, b)

    @property
    def overlap(self) -> bool:
        both = self.intervals
        return both is not None and both[0].overlaps(both[1])

    def shown(self) -> tuple[str, str, str, str]:
        """A, B, whether the verdicts agree and whether the intervals overlap, as the tables write
        them: `ran apart` for a side where its cells ran apart, `-` where the pair is not valid, or a
        question one round cannot answer; `not comparable` for both questions where A's and B's cells ran unlike,
        but for the verdicts of cells apart in their machines alone: `yes (other hardware)` or `no (other hardware)`."""
        a, b = (s.text() if s is not None else "ran apart" if why else "-"
                for s, why in ((self.a, self.apart_a), (self.b, self.apart_b)))
        across = f"{'yes' if self.agree_across_hardware else 'no'} (other hardware)"
        if self.agree_across_hardware != self.direction_agrees_across_hardware or not self.agree_across_hardware:
            # the words apart (`faster` against `under 5%`), or one word both ways: whether fusion helped on both
            across += f", direction {'yes' if self.direction_agrees_across_hardware else 'no'}"
        agree = ("yes" if self.agree else "no" if self.judged else across if self.judged_across_hardware
                 else "-" if self.across_hardware else "not comparable" if self.unlike else "-")
        overlap = "yes" if self.overlap else "no" if self.intervals else "not comparable" if self.unlike else "-"
        return a, b, agree, overlap

    def recorded(self) -> dict[str, Any]:
        def side(speedup: Speedup | None) -> dict[str, Any] | None:
            if speedup is None:
                return None
            interval = speedup.interval
            return {"speedup": speedup.value, "rounds": speedup.rounds, "verdict": speedup.verdict, "shown": speedup.text(),
                    "paired": speedup.paired,
                    "interval": None if interval is None else {"low": interval.low, "high": interval.high,
                                                                 "coverage": interval.coverage}}
        # null where the table says `-`: false would read as verdicts that disagree, intervals apart
        return {"pair": self.name, "a": side(self.a), "b": side(self.b), "agree": self.agree if self.judged else None,
                "agree_across_hardware": self.agree_across_hardware if self.judged_across_hardware else None,
                "direction_agrees_across_hardware": (self.direction_agrees_across_hardware if self.judged_across_hardware
                                                     else None),
                "overlap": self.overlap if self.intervals else None,
                "ran_apart": {"a": self.apart_a or None, "b": self.apart_b or None}, "unlike": self.unlike or None}


def fusion_verdicts(a: LoadedBundle, b: LoadedBundle, passed: frozenset[str] = frozenset()) -> list[FusionVerdict]:
    """Every fusion pair valid in A or B, in A's order, then B's others; a side where the pair's cells
    ran apart says so, and a pair whose cells ran unlike in A and in B (`unlike_runs`, with `passed`
    the variables either run's `env:` passed on) says why."""
    def pairs(loaded: LoadedBundle) -> tuple[dict[str, FusionPair], dict[str, str]]:
        rows = bundle_rows(loaded)
        return ({_pair_id(pair): pair for pair in fusion_pairs(rows)},
                {_pair_id(pair): why for pair, why in pairs_apart(rows)})

    (in_a, apart_a), (in_b, apart_b) = pairs(a), pairs(b)
    verdicts = []
    for key in [*in_a, *(key for key in in_b if key not in in_a)]:
        pair_a, pair_b = in_a.get(key), in_b.get(key)
        either = pair_a or pair_b
        assert either is not None  # the key came from one of them
        apart = [] if pair_a is None or pair_b is None else [
            (side, runs_apart(cell_a.record, cell_b.record, passed))
            for side, cell_a, cell_b in (("on", pair_a.on, pair_b.on), ("off", pair_a.off, pair_b.off))]
        # every reason, not the first: beside other hardware, the threads are what keeps two verdicts apart
        unlike = "; ".join(f"fusion {side}: {'; '.join(why.said())}" for side, why in apart if why.said())
        across = bool(unlike) and all(why.only_hardware for _, why in apart if why.words())
        verdicts.append(FusionVerdict(either.name, pair_a.result if pair_a else None, pair_b.result if pair_b else None,
                                      apart_a.get(key, ""), apart_b.get(key, ""), unlike, across))
    return verdicts


def _pair_id(pair: FusionPair) -> str:
    """The same in both bundles for the same pair: the pairing keys of its two cells."""
    return f"{pairing_key(pair.on.record)}/{pairing_key(pair.off.record)}"


def verdict_line(verdicts: list[FusionVerdict]) -> str:
    """`verdicts agree: K of N pairs; intervals overlap: M of N`, N the pairs valid in both bundles
    whose cells ran alike in both; those whose cells ran on other hardware alone, their verdicts
    set side by side and their intervals not, and those that ran otherwise unlike, are counted apart."""
    valid = [v for v in verdicts if v.a is not None and v.b is not None]
    both = [v for v in valid if not v.unlike]
    across = [v for v in valid if v.unlike and v.across_hardware]
    unjudged = sum(1 for v in both if not v.judged)
    line = (f"verdicts agree: {sum(v.agree for v in both)} of {len(both)} pairs; "
            f"intervals overlap: {sum(v.overlap for v in both)} of {len(both)}")
    line += f" ({unjudged} with one round, or rounds alike, in a bundle: no verdict)" if unjudged else ""
    if across:
        unjudged_across = sum(1 for v in across if not v.judged_across_hardware)
        line += (f"; on other hardware, verdicts agree: {sum(v.agree_across_hardware for v in across)} of "
                 f"{len(across)} pairs" + (f" ({unjudged_across} with no verdict in a bundle)" if unjudged_across else "")
                 + f", their directions {sum(v.direction_agrees_across_hardware for v in across)} of {len(across)}"
                 + ", intervals not compared (a speedup's size is its machine's)")
    unlike = len(valid) - len(both) - len(across)
    return line + (f"; {unlike} not compared, their cells ran unlike in A and B (listed below)" if unlike else "")
