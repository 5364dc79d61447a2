"""Weng-Lin ratings by openskill's BradleyTerryFull, the peer of our Weng-Lin baseline.

    python tests/peers/weng_lin_openskill.py < matches.json > ratings.json

Input (JSON): {"players": N, "beta": B, "kappa": K, "tau": T,
               "matches": [[[team A's player ids], [team B's], score_a], ...]}
with score_a 1 (A wins) or 0 (B wins). Every player starts at openskill's prior (mu 25,
sigma 25/3). Output (JSON): {"mu": [...], "sigma": [...]}, per player after all matches, in
order. Draws are not accepted: openskill 6 averages the mean change of teams that tie, a step of
its own that the Weng-Lin algorithm does not have.
"""

import json
import sys

from openskill.models import BradleyTerryFull


def main():
    spec = json.load(sys.stdin)
    model = BradleyTerryFull(beta=spec["beta"], kappa=spec["kappa"], tau=spec["tau"])
    ratings = [model.rating() for _ in range(spec["players"])]
    for a, b, score_a in spec["matches"]:
        if score_a not in (0, 1):
            sys.exit(f"score_a {score_a}: draws are not compared (see the docstring)")
        ranks = [0, 1] if score_a == 1 else [1, 0]
        new_a, new_b = model.rate([[ratings[i] for i in a], [ratings[i] for i in b]], ranks=ranks)
        for i, r in zip(a, new_a):
            ratings[i] = r
        for i, r in zip(b, new_b):
            ratings[i] = r
    json.dump({"mu": [r.mu for r in ratings], "sigma": [r.sigma for r in ratings]}, sys.stdout)


if __name__ == "__main__":
    main()
