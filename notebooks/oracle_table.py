"""The 1v1 oracle-bound table of docs/benchmarks.md ("Offline evaluation") from the
`evaluation.json` files `task evaluate:oracle` writes.

    python3 notebooks/oracle_table.py out/oracle/s9001 out/oracle/s9002 ...

One row per world and pool size: the oracle's gain over SkillMM under the simulator's truth, our
EOMM's, the share, the two half-oracles' shares, and EOMM over SkillMM with draws from the fitted
models (paired and Welch p). Standard library only.
"""

import json
import sys
from pathlib import Path


def pct(x: float, digits: int = 3) -> str:
    return f"{x * 100:+.{digits}f}%"


def share(x: float) -> str:
    """Whole percent, with one decimal just under one half (the target), where rounding would
    reach it."""
    p = x * 100
    return f"{p:.1f}%" if 49.5 <= p < 50 else f"{p:.0f}%"


def p_value(p: float) -> str:
    if p <= 0:
        return "below 1e-300"
    if p >= 0.001:
        return f"{p:.2g}" if p < 0.01 else f"{p:.3g}"
    return f"{p:.1e}"


def rows(world: Path) -> list[str]:
    e = json.loads((world / "evaluation" / "evaluation.json").read_text())
    seed = world.name.lstrip("s")
    out = []
    for r in e["eomm_vs_skill"]:
        t = r["truth"]
        out.append(
            f"| {seed}, {r['pool_size']} | {pct(t['oracle_gain'])} | {pct(t['realised_gain'])} "
            f"| {share(t['share'])} | {t['true_win_share'] * 100:.0f}% "
            f"| {t['true_churn_share'] * 100:.0f}% | {pct(r['relative_improvement'], 2)} "
            f"| {p_value(r['paired_p_value'])} | {p_value(r['p_value'])} |"
        )
    return out


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: oracle_table.py WORLD_DIR [WORLD_DIR ...]")
    print(
        "| seed, P | oracle gain | our EOMM under the truth | share | true win + our churn "
        "| our win + true churn | EOMM over SkillMM (draws) | paired p | Welch p |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for w in sys.argv[1:]:
        for line in rows(Path(w)):
            print(line)


if __name__ == "__main__":
    main()
