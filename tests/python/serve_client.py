"""`mm serve` called from Python (grpcio), as a game backend would: stubs generated from the
repository's proto with grpcio-tools, then every method (Score, Pair, a team queue's Enqueue,
Cancel, Explain, Tick, OpenBackfill and CloseBackfill, and ReportMatch and ReportMatches with
the service's token) and the health service, refused requests, one reload (a version promoted by `mm models promote` while the server runs)
and a rollback; then a second server over TLS with client certificates as the credential. The
reported matches move their players' scores at once and land in the lake
(read back with the deltalake package), with the replica's application transaction.

Usage: serve_client.py MODELS_ROOT NAME, with MM_BIN naming the `mm` binary. The model must hold
two versions, v0001 as LATEST and v0002 beside it. The server is started with --max-seconds and
stopped at the end.
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import grpc
import polars as pl
from deltalake import DeltaTable
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_tools import protoc

REPO = pathlib.Path(__file__).resolve().parents[2]
MM = os.environ["MM_BIN"]
ROOT = pathlib.Path(sys.argv[1])
NAME = sys.argv[2]
TOKEN = "py-client-token"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


def stubs():
    out = tempfile.mkdtemp(prefix="mm-proto-")
    proto = REPO / "proto"
    code = protoc.main([
        "protoc", f"-I{proto}", f"--python_out={out}", f"--grpc_python_out={out}",
        str(proto / "mm" / "v1" / "matcher.proto"),
    ])
    assert code == 0, f"protoc exited {code}"
    sys.path.insert(0, out)
    from mm.v1 import matcher_pb2, matcher_pb2_grpc  # noqa: E402
    return matcher_pb2, matcher_pb2_grpc


def wait_for(matcher, pb, players, version):
    deadline = time.monotonic() + 20
    while matcher.Score(pb.ScoreRequest(players=players), timeout=10).model_version != version:
        assert time.monotonic() < deadline, f"{version} was not picked up in 20 s"
        time.sleep(0.1)


def report_matches(matcher, pb, ids, mode, lake):
    """Five 1v1 results: refused without the token; with it, three ReportMatch calls, each moving
    its players (the next Score sees the report's numbers); a second report of a match is a
    duplicate; then one ReportMatches call of two new matches and a duplicate, answered match by
    match. The lake holds each match once, with this replica's application transaction."""
    start = 1_900_000_000_000
    reports = [pb.ReportMatchRequest(
        match_id=f"py-{k}", mode=mode, start_ms=start + k * 60_000,
        # The winner leads on every metric raw skill may compare (perf, kills per enemy
        # death, score per minute, the outcome).
        players=[pb.PlayerResult(player_id=ids[2 * k], team=0, outcome=pb.OUTCOME_WIN,
                                 perf=0.7, kills=5, deaths=1, deaths_by_enemy=1, score=500,
                                 seconds_played=600),
                 pb.PlayerResult(player_id=ids[2 * k + 1], team=1, outcome=pb.OUTCOME_LOSS,
                                 perf=0.3, kills=1, deaths=5, deaths_by_enemy=5, score=100,
                                 seconds_played=600)]) for k in range(5)]
    try:
        matcher.ReportMatch(reports[0], timeout=10)
        raise AssertionError("a report without the token was accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
    before = {p.id: p for p in matcher.Score(pb.ScoreRequest(
        players=[pb.Player(id=i) for i in ids[:6]]), timeout=10).players}
    for r in reports[:3]:
        got = matcher.ReportMatch(r, timeout=10, metadata=AUTH)
        assert got.status == pb.REPORT_STATUS_RECORDED and got.sequence > 0, got
        winner, loser = got.players
        assert winner.raw_skill > before[winner.id].raw_skill, (winner, before[winner.id])
        assert loser.raw_skill < before[loser.id].raw_skill, (loser, before[loser.id])
        now = matcher.Score(pb.ScoreRequest(players=[pb.Player(id=winner.id)]), timeout=10)
        assert now.players[0].raw_skill == winner.raw_skill, (now, winner)
        assert now.players[0].games == before[winner.id].games + 1, now
    dup = matcher.ReportMatch(reports[1], timeout=10, metadata=AUTH)
    assert dup.status == pb.REPORT_STATUS_DUPLICATE, dup
    batch = matcher.ReportMatches(pb.ReportMatchesRequest(matches=[reports[3], reports[4],
                                                                   reports[0]]),
                                  timeout=10, metadata=AUTH).results
    assert [r.error_code for r in batch] == [0, 0, 0], batch
    assert [r.response.status for r in batch] == [pb.REPORT_STATUS_RECORDED] * 2 + [
        pb.REPORT_STATUS_DUPLICATE], batch
    assert batch[0].response.players[0].id == ids[6], batch[0]
    deadline = time.monotonic() + 30
    while True:
        try:
            rows = pl.read_delta(str(lake / "matches"))
        except Exception:  # noqa: BLE001 - the table appears with the first flush
            rows = None
        if rows is not None and rows.height == 10:
            break
        assert time.monotonic() < deadline, f"the lake holds {rows} after 30 s"
        time.sleep(0.1)
    assert sorted(set(rows["match_id"].to_list())) == [f"py-{k}" for k in range(5)], rows
    assert DeltaTable(str(lake / "matches")).transaction_version("mm-serve/py") == 5


def pki(d, name, cn, san):
    """A CA and a certificate it signed, made by the openssl command line in `d`:
    (ca.pem, cert.pem, key.pem) as bytes."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem", "-days", "2",
        "-subj", f"/CN={name} CA")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
    run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{name}-ca.pem", "-CAkey",
        f"{name}-ca.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "2",
        "-extfile", f"{name}.ext")
    return tuple((d / f).read_bytes() for f in (f"{name}-ca.pem", f"{name}.pem", f"{name}.key"))


def tls(pb, rpc, model, ids):
    """`mm serve` over TLS with client certificates as the credential (no token): a client with
    a certificate of the client CA is answered; one without a certificate gets no call
    through."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="mm-serve-tls-"))
    server_ca, server_cert, server_key = pki(d, "server", "localhost",
                                             "DNS:localhost,IP:127.0.0.1")
    client_ca, client_cert, client_key = pki(d, "client", "game-server-7", "DNS:game-server-7")
    server = subprocess.Popen(
        [MM, "serve", "--models", str(model), "--listen", "127.0.0.1:0", "--max-seconds", "60",
         "--tls-cert", str(d / "server.pem"), "--tls-key", str(d / "server.key"),
         "--client-ca", str(d / "client-ca.pem")],
        env={k: v for k, v in os.environ.items() if k != "MM_SERVE_TOKEN"},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline().strip()
        assert line.startswith("listening on "), line
        addr = line.removeprefix("listening on ")
        override = (("grpc.ssl_target_name_override", "localhost"),)
        good = grpc.secure_channel(addr, grpc.ssl_channel_credentials(
            root_certificates=server_ca, private_key=client_key,
            certificate_chain=client_cert), options=override)
        s = rpc.MatcherStub(good).Score(pb.ScoreRequest(players=[pb.Player(id=ids[0])]),
                                        timeout=20)
        assert s.players[0].known, s
        bare = grpc.secure_channel(addr, grpc.ssl_channel_credentials(
            root_certificates=server_ca), options=override)
        try:
            rpc.MatcherStub(bare).Score(pb.ScoreRequest(players=[pb.Player(id=ids[0])]),
                                        timeout=10)
            raise AssertionError("a client without a certificate was answered")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    finally:
        server.terminate()
        server.wait(timeout=20)


def main():
    pb, rpc = stubs()
    model = ROOT / NAME
    assert (model / "LATEST").read_text().strip() == "v0001"
    ids = pl.read_parquet(model / "v0001" / "players.parquet")["player_id"].head(20).to_list()
    mode = json.loads((model / "v0001" / "manifest.json").read_text())["mode"]
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="mm-serve-py-"))
    lake = scratch / "lake"
    server = subprocess.Popen(
        [MM, "serve", "--models", str(model), "--listen", "127.0.0.1:0",
         "--reload-ms", "100", "--max-seconds", "90", "--lake", str(lake),
         "--wal", str(scratch / "wal"), "--replica", "py", "--flush-s", "0.2"],
        env={**os.environ, "MM_SERVE_TOKEN": TOKEN},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline().strip()
        assert line.startswith("listening on "), line
        channel = grpc.insecure_channel(line.removeprefix("listening on "))
        grpc.channel_ready_future(channel).result(timeout=20)
        matcher = rpc.MatcherStub(channel)

        health = health_pb2_grpc.HealthStub(channel)
        h = health.Check(health_pb2.HealthCheckRequest(service="mm.v1.Matcher"), timeout=10)
        assert h.status == health_pb2.HealthCheckResponse.SERVING, h

        players = [pb.Player(id=i) for i in ids[:4]] + [pb.Player(id="newcomer")]
        s = matcher.Score(pb.ScoreRequest(players=players), timeout=10)
        assert s.model_version == "v0001", s.model_version
        assert [p.known for p in s.players] == [True] * 4 + [False]
        for p in s.players:
            assert -1.0 <= p.raw_skill <= 1.0 and 0.0 <= p.percentile <= 1.0
            for c in (p.churn_after_win, p.churn_after_draw, p.churn_after_loss):
                assert 0.0 < c < 1.0, p
        # A player the snapshot does not know, with the state the service keeps for it.
        state = pb.PlayerState(raw_skill=0.3, games=5, last_seen_ms=1_000, recent=[
            pb.PlayedMatch(start_ms=500, outcome=pb.OUTCOME_LOSS, score_diff=-3.0,
                           perf_rank=0.2),
            pb.PlayedMatch(start_ms=1_000, outcome=pb.OUTCOME_WIN, score_diff=float("nan"),
                           perf_rank=float("nan"))])
        given = matcher.Score(pb.ScoreRequest(players=[pb.Player(id="from-state", state=state)],
                                              now_ms=2_000), timeout=10).players[0]
        assert not given.known and given.raw_skill == 0.3 and given.games == 5, given
        # The skill the team win model reads comes back as outcome_skill: the whole-history win
        # skill when the artifact's model reads it (format 5), raw skill otherwise. A win skill
        # in the state is used then; without one, a player the snapshot does not hold has 0.
        basis = json.loads((model / "v0001" / "team_win.json").read_text()).get("basis",
                                                                                "raw-skill")
        with_win = pb.PlayerState(raw_skill=0.3, win_skill=1.7, games=5, last_seen_ms=1_000)
        w = matcher.Score(pb.ScoreRequest(players=[pb.Player(id="with-win", state=with_win)],
                                          now_ms=2_000), timeout=10).players[0]
        if basis == "win-skill":
            assert (w.outcome_skill, given.outcome_skill) == (1.7, 0.0), (w, given)
        else:
            assert basis == "raw-skill", basis
            assert (w.outcome_skill, given.outcome_skill) == (0.3, 0.3), (w, given)
        assert w.raw_skill == 0.3, w
        lobby = matcher.Score(pb.ScoreRequest(players=players[:4], teams=[0, 1, 0, 1]),
                              timeout=10).lobby
        assert abs(lobby.win + lobby.draw + lobby.loss - 1.0) < 1e-9, lobby

        eomm = matcher.Pair(pb.PairRequest(ids=ids, policy=pb.PAIR_POLICY_EOMM), timeout=10)
        skill = matcher.Pair(pb.PairRequest(ids=ids, policy=pb.PAIR_POLICY_SKILL), timeout=10)
        assert len(eomm.pairs) == 10 and len(skill.pairs) == 10
        paired = sorted(x for p in eomm.pairs for x in (p.a, p.b))
        assert paired == sorted(ids), "each player once"
        assert eomm.objective <= skill.objective + 1e-9, (eomm.objective, skill.objective)

        try:
            matcher.Pair(pb.PairRequest(ids=ids[:1]), timeout=10)
            raise AssertionError("a pool of one was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e

        # A 1v1 queue under team EOMM: two searches, a refused duplicate, Explain, Tick, Cancel.
        spec = pb.QueueSpec(name="duel", team_size=1, policy=pb.QUEUE_POLICY_EOMM)
        for k in range(3):
                r = matcher.Enqueue(pb.EnqueueRequest(queue=spec, party=pb.Party(
                search_id=k, player_ids=[ids[k]], start_ms=1_000, lat=48.8, lon=2.3,
                crossplay=True)), timeout=10, metadata=AUTH)
        assert r.queued_searches == 3, r
        try:
            matcher.Enqueue(pb.EnqueueRequest(queue=spec, party=pb.Party(
                search_id=0, player_ids=[ids[5]], start_ms=1_000)), timeout=10, metadata=AUTH)
            raise AssertionError("a duplicate search was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.ALREADY_EXISTS, e
        why = matcher.Explain(pb.ExplainRequest(queue="duel", search_id=2, now_ms=1_000),
                              timeout=10)
        assert why.players_needed == 2 and why.max_wait_at_ms > 1_000, why
        assert matcher.Cancel(pb.CancelRequest(queue="duel", search_id=2), timeout=10,
                              metadata=AUTH).removed
        tick = matcher.Tick(pb.TickRequest(queue="duel", now_ms=600_000), timeout=10,
                            metadata=AUTH)
        assert len(tick.lobbies) == 1 and tick.queued_searches == 0, tick
        lobby = tick.lobbies[0]
        assert sorted(list(lobby.team_a) + list(lobby.team_b)) == [0, 1], lobby
        assert 0.0 <= lobby.quality <= 1.0 and lobby.expected_churn > 0.0, lobby
        # Backfill: team A's player leaves, the slot is offered, the next Tick fills it with a
        # new search (the lobby's backoff, counted from the offer, admits any skill at 120 s).
        gone = ids[lobby.team_a[0]]
        opened = matcher.OpenBackfill(pb.OpenBackfillRequest(
            queue="duel", lobby_id=lobby.lobby_id, leaving_player_ids=[gone], now_ms=600_000),
            timeout=10, metadata=AUTH)
        assert (opened.players_a, opened.players_b, opened.open_slots) == (0, 1, 1), opened
        why = matcher.Explain(pb.ExplainRequest(queue="duel", lobby_id=lobby.lobby_id,
                                                now_ms=600_000), timeout=10)
        assert (why.players_found, why.players_needed) == (1, 2), why
        matcher.Enqueue(pb.EnqueueRequest(queue=spec, party=pb.Party(
            search_id=7, player_ids=[ids[7]], start_ms=600_000, lat=48.8, lon=2.3,
            crossplay=True)), timeout=10, metadata=AUTH)
        tick = matcher.Tick(pb.TickRequest(queue="duel", now_ms=730_000), timeout=10,
                            metadata=AUTH)
        assert [(b.lobby_id, b.search_id, b.team) for b in tick.backfills] == [
            (lobby.lobby_id, 7, 0)], tick
        assert tick.backfills[0].slot_open_ms == 130_000 and tick.open_slots == 0, tick
        # Intermission: the teams are balanced again on current skill; a 1v1 is as good either
        # way round, so nobody moves.
        inter = matcher.OpenBackfill(pb.OpenBackfillRequest(
            queue="duel", lobby_id=lobby.lobby_id, now_ms=800_000, intermission=True),
            timeout=10, metadata=AUTH)
        assert (inter.players_a, inter.players_b, inter.open_slots) == (1, 1, 0), inter
        assert list(inter.moved) == [], inter
        matcher.CloseBackfill(pb.CloseBackfillRequest(queue="duel", lobby_id=lobby.lobby_id,
                                                      end_lobby=True), timeout=10, metadata=AUTH)

        report_matches(matcher, pb, ids, mode, lake)

        subprocess.run([MM, "models", "promote", "v0002", "--models", str(ROOT), "--name", NAME,
                        "-q"], check=True, stdout=subprocess.DEVNULL)
        wait_for(matcher, pb, players, "v0002")
        # A rollback is picked up the same way.
        subprocess.run([MM, "models", "rollback", "--models", str(ROOT), "--name", NAME, "-q"],
                       check=True, stdout=subprocess.DEVNULL)
        wait_for(matcher, pb, players, "v0001")
        tls(pb, rpc, model, ids)
        print(f"serve client (Python, grpcio; team win model on {basis}): Score, Pair, "
              "Enqueue, Cancel, Explain, Tick, OpenBackfill (and at intermission), CloseBackfill, ReportMatch (3 matches) and ReportMatches (2 and a duplicate), in the lake, Health, "
              "refused requests, a reload to v0002, a rollback to v0001 and a TLS server with "
              "client certificates all answered as expected")
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
