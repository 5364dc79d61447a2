"""The team EOMM table of docs/eomm.md from `mm evaluate`'s evaluation.json files.

    python3 notebooks/team_eomm_table.py [--rows eomm,oracle] LABEL=PATH/evaluation.json ...
    python3 notebooks/team_eomm_table.py --bounds BOUND=PATH/evaluation.json ...

One markdown table per file: every team-queue policy's waits, predicted blowouts and balance,
skill disparity, expected churn under the churn model and under the simulator's truth, true
blowouts, the true balance and how much more often than our team win model predicts its
favourite wins, and true retention over the CoD rules (paired over the players both placed); then the
team oracle's line with its two half-oracles. With `--bounds`, one row per file of a balance-bound sweep (`task
evaluate:balance`): team EOMM's wait, balance and true blowouts, its true retention over the CoD
rules and the oracle's, and the share. Standard library only.
"""

import json
import sys


def table(label, path, only=None):
    e = json.load(open(path))
    t = e["team_queue"]
    rows = [p for p in t["policies"] if p["artifact"] == t["policies"][0]["artifact"]]
    tests = {(x["a"], x["b"]): x for x in t["tests"]}
    cod = next(p for p in rows if p["policy"] == "cod")
    out = [
        f"**{label}** ({t['team_size']}v{t['team_size']}, {e['window']}, "
        f"{rows[0]['searches']:,} searches)",
        "",
        "| policy | mean wait | predicted blowouts | mean abs(P(win) - 1/2) | skill disparity "
        "| expected churn (our model) | true churn | true blowouts | true abs(P(win) - 1/2) "
        "| favourite's excess | true retention over CoD (paired p) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in rows:
        if only and p["policy"] not in only:
            continue
        tr = p.get("truth") or {}
        vs = "–"
        pt = tests.get((p["label"], cod["label"]), {}).get("paired_truth")
        if pt:
            vs = f"{pt['diff']:+.5f} (p {pt['p']:.3f})"
        true_churn = f"{tr['expected_churn']:.4f}" if tr else "–"
        true_blow = f"{100 * tr['blowout_rate']:.1f}%" if tr else "–"
        # Evaluations from before the truth's balance was recorded have none.
        true_bal = f"{tr['mean_abs_pwin_minus_half']:.3f}" if "favourite_excess" in tr else "–"
        # Rounded first, so that a small negative prints as +0.000, not -0.000.
        excess = f"{round(tr['favourite_excess'], 3) + 0.0:+.3f}" if "favourite_excess" in tr else "–"
        out.append(
            f"| {p['policy']} | {p['wait_s_mean']:.1f} s | {100 * p['blowout_rate']:.1f}% "
            f"| {p['mean_abs_pwin_minus_half']:.3f} | {p['mean_skill_disparity']:.3f} "
            f"| {p['expected_churn']:.4f} | {true_churn} | {true_blow} | {true_bal} | {excess} "
            f"| {vs} |"
        )
    o = t.get("oracle")
    if o:
        out.append("")
        out.append(
            f"Team oracle: {o['available_gain']:+.5f} true retention per player over the CoD "
            f"rules (p {o['available_p']:.3g}); team EOMM {o['realised_gain']:+.5f} "
            f"(p {o['realised_p']:.3f}): {100 * o['share']:.0f}% of the available gain. "
            f"Half-oracles: the true churn with our win model {o['true_churn_gain']:+.5f} "
            f"(p {o['true_churn_p']:.3f}, {100 * o['true_churn_gain'] / o['available_gain']:.0f}%), "
            f"our churn with the true outcomes {o['true_outcomes_gain']:+.5f} "
            f"(p {o['true_outcomes_p']:.3f}, "
            f"{100 * o['true_outcomes_gain'] / o['available_gain']:.0f}%)."
        )
    return "\n".join(out)


def bound_row(label, path):
    t = json.load(open(path))["team_queue"]
    rows = {p["policy"]: p for p in t["policies"]}
    e, o = rows["eomm"], t["oracle"]
    return (
        f"| {label} | {e['wait_s_mean']:.1f} s | {e['mean_abs_pwin_minus_half']:.3f} "
        f"| {100 * e['truth']['blowout_rate']:.1f}% "
        f"| {o['realised_gain']:+.5f} (p {o['realised_p']:.3f}) "
        f"| {o['available_gain']:+.5f} (p {o['available_p']:.3f}) | {100 * o['share']:.0f}% |"
    )


def bounds(args):
    out = [
        "| bound | EOMM wait | EOMM mean abs(P(win) - 1/2) | EOMM true blowouts "
        "| EOMM true retention over CoD (p) | oracle's (p) | share |",
        "|---|---|---|---|---|---|---|",
    ]
    cod = None
    for a in args:
        label, _, path = a.rpartition("=")
        out.append(bound_row(label, path))
        if cod is None:
            t = json.load(open(path))["team_queue"]
            cod = next(p for p in t["policies"] if p["policy"] == "cod")
    out.append("")
    out.append(
        f"(The CoD rules on the same day: {cod['wait_s_mean']:.1f} s, "
        f"{cod['mean_abs_pwin_minus_half']:.3f}, true blowouts "
        f"{100 * cod['truth']['blowout_rate']:.1f} %.)"
    )
    return "\n".join(out)


def main(args):
    if args[:1] == ["--bounds"]:
        print(bounds(args[1:]))
        return
    only = None
    if args[:1] == ["--rows"]:
        only, args = args[1].split(","), args[2:]
    if not args:
        sys.exit(__doc__)
    for a in args:
        label, _, path = a.rpartition("=")
        print(table(label or path, path, only))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
