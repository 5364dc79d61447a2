"""The leavers-and-backfill table of docs/backfill.md from `mm evaluate`'s evaluation.json files.

    python3 notebooks/backfill_table.py LABEL=PATH/evaluation.json ...

One markdown table per file (a simulated 6v6 day replayed with leavers): for every team-queue
policy with and without backfill, the matches, the players who quit, the time to fill a slot
against the new lobbies' wait, the matches finished short-handed, the team size and skill
differential after backfill, true blowouts and true churn; then whether issue 53's two targets
hold for each policy (median fill under the median new-lobby wait; short-handed matches at
least halved). Exits 1 when a file has no replay with leavers. Standard library only.
"""

import json
import sys


def fmt(x, digits=0):
    return "–" if x is None else f"{x:.{digits}f}"


def secs(a, b):
    return "–" if a is None else f"{a:.0f} s, {b:.0f} s"


def table(label, path):
    e = json.load(open(path))
    t = e.get("team_queue") or {}
    lv = t.get("leavers")
    if not lv:
        sys.exit(f"{path}: no replay with leavers (not a simulated 6v6 lake?)")
    n = t["team_size"]
    out = [
        f"**{label}** ({n}v{n}, {e['window']}; quits {lv['quit_base_per_min']} per player-minute "
        f"in a level match, times e every {lv['quit_deficit_kills']:.0f} kills behind)",
        "",
        "| policy | backfill | matches | quits | slots filled | fill: median, p95 "
        "| new-lobby wait: median, p95 | finished short-handed | size / skill differential "
        "after backfill | true blowouts | true churn (95% CI) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    runs = lv["runs"]
    for r in runs:
        after = "–"
        if r["backfills"]:
            after = (
                f"{r['size_diff_after_backfill']:.3f} / {r['skill_diff_after_backfill']:.3f}"
                f" ({r['worsened']} worsened)"
            )
        lo, hi = r["true_churn_ci95"]
        out.append(
            f"| {r['policy']} | {'yes' if r['backfill'] else 'no'} | {r['lobbies']} "
            f"| {r['quits']} ({100 * r['quit_share']:.1f}%) | {r['slots_filled']} "
            f"| {secs(r['fill_s_p50'], r['fill_s_p95'])} "
            f"| {secs(r['wait_s_p50'], r['wait_s_p95'])} "
            f"| {100 * r['short_handed']:.1f}% | {after} | {100 * r['true_blowouts']:.1f}% "
            f"| {r['true_churn']:.4f} ({lo:.4f} – {hi:.4f}) |"
        )
    for w in (r for r in runs if r["backfill"]):
        wo = next(r for r in runs if not r["backfill"] and r["policy"] == w["policy"])
        fill = w["fill_s_p50"] is not None and w["fill_s_p50"] < w["wait_s_p50"]
        ratio = w["short_handed"] / wo["short_handed"] if wo["short_handed"] else float("nan")
        ret = w.get("retention_vs_no_backfill") or {}
        verdicts.append(
            f"- {w['policy']}: median fill {fmt(w['fill_s_p50'])} s against a median new-lobby "
            f"wait of {fmt(w['wait_s_p50'])} s ({'met' if fill else 'not met'}); short-handed "
            f"{100 * w['short_handed']:.1f}% against {100 * wo['short_handed']:.1f}% without "
            f"backfill, {ratio:.2f} times ({'met' if ratio <= 0.5 else 'not met'}); retention "
            f"over no backfill {ret.get('diff', float('nan')):+.5f} (p {ret.get('p', float('nan')):.2f})"
        )
    return "\n".join(out + [""] + verdicts)


def main(args):
    if not args:
        sys.exit(__doc__)
    parts = []
    for a in args:
        label, _, path = a.partition("=")
        parts.append(table(label, path))
    print("\n\n".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
