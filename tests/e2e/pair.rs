//! `mm pair`: pools from disk in both formats, the peers' reference optima, and bad input.

use std::path::PathBuf;

use crate::util::mm;

fn mm_pair(args: &[&str]) -> (i32, String, String) {
    mm(&[&["pair"], args].concat())
}

fn pools() -> Option<PathBuf> {
    crate::util::shared("peers/results/pools")
}

/// The int32 pool of P = 200 gives networkx's optimum (82532166, results/mwpm_P200.json) with a
/// verified certificate; every player is paired exactly once.
#[test]
fn int32_pool_matches_networkx_optimum_and_is_certified() {
    let Some(dir) = pools() else { return };
    let f = dir.join("pool_P200_s20240601_wq.i32");
    let (code, out, err) = mm_pair(&["--costs", f.to_str().unwrap(), "--verify", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["policy"], "eomm");
    assert_eq!(r["objective"], 82532166);
    assert_eq!(r["certified"], true);
    let mut seen = [0; 200];
    for p in r["pairs"].as_array().unwrap() {
        for id in p.as_array().unwrap() {
            seen[id.as_str().unwrap().parse::<usize>().unwrap()] += 1;
        }
    }
    assert!(seen.iter().all(|&k| k == 1));
}

/// Players with states (the peers' CSV): every policy runs on the same pool, EOMM is the least
/// and WorstMM the most expected churn, and SkillMM reproduces the peer's objective on floats.
#[test]
fn players_csv_runs_every_policy() {
    let Some(dir) = pools() else { return };
    let f = dir.join("pool_P100_s20240601.csv");
    let (code, out, err) = mm_pair(&["--pool", f.to_str().unwrap(), "--policy", "all", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let res = v["results"].as_array().unwrap();
    let obj = |name: &str| {
        res.iter().find(|r| r["policy"] == name).unwrap()["objective"]
            .as_f64()
            .unwrap()
    };
    let names: Vec<&str> = res.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(names, ["eomm", "greedy", "skill", "random", "worst"]);
    for n in &names {
        assert!(obj("eomm") <= obj(n) && obj(n) <= obj("worst"), "{n}");
    }
    // results/mwpm_P100.json: skillmm_float 44.295401312296185.
    assert!((obj("skill") - 44.295401312296185).abs() < 1e-9);
}

#[test]
fn odd_pool_reports_who_waits() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p.csv");
    std::fs::write(
        &f,
        "id,skill,c_win,c_lose,c_draw\na,1500,0.2,0.5,0.3\nb,1510,0.2,0.5,0.3\nc,2400,0.9,0.9,0.9\n",
    )
    .unwrap();
    let (code, out, err) = mm_pair(&["--pool", f.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Pairing c with anyone costs far more churn than a with b: c waits.
    assert_eq!(v["results"][0]["waiting"], "c");
    assert_eq!(v["results"][0]["pairs"][0], serde_json::json!(["a", "b"]));
}

#[test]
fn bad_input_names_file_line_and_field_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p.csv");
    std::fs::write(
        &f,
        "id,skill,c_win,c_lose,c_draw\na,1500,0.2,0.5,0.3\nb,1510,NaN,0.5,0.3\n",
    )
    .unwrap();
    // The flag's old name (before `--pool`) still works, with a warning naming the new one.
    let (code, _, err) = mm_pair(&["--players", f.to_str().unwrap()]);
    assert!(err.contains("`mm pair --players` is now `--pool`"), "{err}");
    assert_eq!(code, 2);
    assert!(
        err.contains("p.csv") && err.contains("line 3") && err.contains("c_win"),
        "{err}"
    );

    let g = dir.path().join("m.i32");
    std::fs::write(&g, [0u8; 5]).unwrap();
    let (code, _, err) = mm_pair(&["--costs", g.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("m.i32") && err.contains("int32"), "{err}");

    // 2 x 2 but not symmetric.
    let bytes: Vec<u8> = [0i32, 1, 2, 0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(&g, bytes).unwrap();
    let (code, _, err) = mm_pair(&["--costs", g.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not symmetric"), "{err}");

    let (code, _, err) = mm_pair(&["--costs", "/nonexistent/pool.i32"]);
    assert_eq!(code, 2, "{err}");
}
