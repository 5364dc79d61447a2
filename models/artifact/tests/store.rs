#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! The artifact store: atomic publishing with a failure injected before every step, loading
//! that names the file and the problem for every kind of corruption, rollback and hot reload.

use std::fs;
use std::path::Path;

use mm_artifact::features::{FeatureSpec, Outcome3, Played, Upcoming};
use mm_artifact::load::{CHURN_FILE, PERCENTILES_FILE, PLAYERS_FILE, TEAM_WIN_FILE};
use mm_artifact::store::{PublishStep, Reload, Reloader, Store};
use mm_artifact::{Artifact, Problem, synthetic};
use proptest::prelude::*;

fn publish(store: &Store, version: &str, players: usize, seed: u64) {
    let (m, files) = synthetic::artifact(players, seed);
    store.publish(version, m, &files, true, None).unwrap();
}

#[test]
fn a_failure_before_any_publish_step_leaves_the_previous_version_loadable() {
    for step in PublishStep::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("m"));
        publish(&store, "v0001", 50, 1);
        let (m, files) = synthetic::artifact(60, 2);
        let err = store
            .publish("v0002", m.clone(), &files, true, Some(step))
            .unwrap_err();
        assert!(err.to_string().contains("injected"), "{err}");
        // LATEST still loads and verifies; before the rename, the new version does not exist.
        let latest = store.latest().unwrap().unwrap();
        let a = store.open_latest().unwrap();
        let expect_new_latest = false;
        assert_eq!(
            latest == "v0002",
            expect_new_latest || step == PublishStep::AppendHistory,
            "{step:?}"
        );
        assert_eq!(a.snapshot.len(), if latest == "v0002" { 60 } else { 50 });
        let renamed = matches!(
            step,
            PublishStep::WriteLatest | PublishStep::MoveLatest | PublishStep::AppendHistory
        );
        assert_eq!(
            store.versions().unwrap().contains(&"v0002".to_string()),
            renamed,
            "{step:?}"
        );
        if renamed {
            // A published but unpromoted version is complete and verifies.
            store.open("v0002").unwrap();
        } else {
            // A retry publishes cleanly (the leftover temporary directory is removed).
            store.publish("v0002", m, &files, true, None).unwrap();
            assert_eq!(store.open_latest().unwrap().snapshot.len(), 60);
            let leftovers = fs::read_dir(store.root())
                .unwrap()
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
                .count();
            assert_eq!(leftovers, 0);
        }
    }
}

#[test]
fn versions_are_immutable_and_names_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    publish(&store, "v0001", 10, 1);
    let (m, files) = synthetic::artifact(10, 1);
    let e = store
        .publish("v0001", m.clone(), &files, true, None)
        .unwrap_err();
    assert!(e.to_string().contains("exists already"), "{e}");
    let e = store
        .publish("../escape", m, &files, true, None)
        .unwrap_err();
    assert!(e.to_string().contains("version name"), "{e}");
}

#[test]
fn snapshot_round_trips_and_features_match_the_training_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    let (m, files) = synthetic::artifact(5000, 9);
    store.publish("v1", m, &files, true, None).unwrap();
    let a = store.open_latest().unwrap();
    let original = synthetic::snapshot(5000, 10, a.manifest.snapshot_as_of_ms, 9);
    assert_eq!(a.snapshot.len(), original.len());
    for (x, y) in a.snapshot.iter().zip(original.iter()) {
        assert_eq!(x.player_id, y.player_id);
        assert_eq!(x.raw_skill.to_bits(), y.raw_skill.to_bits());
        assert_eq!(x.window_counts, y.window_counts);
        assert_eq!(x.before_recent_ms, y.before_recent_ms);
        assert_eq!(x.first_seen_ms, y.first_seen_ms);
        assert_eq!(x.churned_gaps, y.churned_gaps);
        assert_eq!(x.recent.len(), y.recent.len());
        for (p, q) in x.recent.iter().zip(&y.recent) {
            assert_eq!(
                (p.start_ms, p.outcome, p.blowout_loss),
                (q.start_ms, q.outcome, q.blowout_loss)
            );
            assert!(
                p.score_diff.to_bits() == q.score_diff.to_bits()
                    || (p.score_diff.is_nan() && q.score_diff.is_nan())
            );
        }
        assert_eq!(a.snapshot.get(&x.player_id).map(|p| p.games), Some(y.games));
    }
    // Counterfactual churn from the loaded state: three different probabilities in (0, 1).
    let p = &a.snapshot.player(0);
    let probs = [Outcome3::Win, Outcome3::Draw, Outcome3::Loss].map(|o| {
        let row = mm_artifact::snapshot::features_of(
            &a.churn.model.spec,
            p,
            a.manifest.snapshot_as_of_ms + 3_600_000,
            false,
            o,
        );
        a.churn.model.predict(&row)
    });
    assert!(probs.iter().all(|p| *p > 0.0 && *p < 1.0));
}

fn played(h: i64) -> Played {
    Played {
        start_ms: h * 3_600_000,
        outcome: Outcome3::Win,
        score_diff: 1.0,
        perf_rank: 0.5,
        blowout_loss: false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A service that keeps a player's state (snapshot, then `record` after every match)
    /// computes the same feature row as the trainer from the whole history, within the
    /// documented limit of the window counts.
    #[test]
    fn state_rows_equal_full_history_rows(gaps in proptest::collection::vec(1i64..400, 1..40), cut in 0usize..40, later in 1i64..300, lead in proptest::option::of(0i64..1500), horizon_h in 1i64..300) {
        let mut t = 0;
        let all: Vec<Played> = gaps.iter().map(|g| { t += g; played(t) }).collect();
        // With a data start (`lead` hours before the first match), windows and games reaching
        // before it are censored, in both computations alike.
        let spec = FeatureSpec {
            history: 10,
            data_start_ms: lead.map(|l| all[0].start_ms - l * 3_600_000),
            outcome_interactions: 3,
            past_churn_horizon_ms: Some(horizon_h * 3_600_000),
            outcome_pattern: 3,
        };
        let cut = cut.min(all.len());
        let as_of = all[..cut].last().map_or(0, |p| p.start_ms) + 1;
        // The snapshot at `as_of`, built from the first `cut` matches, then the rest recorded.
        let past = &all[..cut];
        let keep = past.len().saturating_sub(spec.history);
        let mut s = mm_artifact::snapshot::PlayerState::new_player("x", as_of, 0.5, 0.0);
        s.games = past.len() as u64;
        s.recent = past[keep..].to_vec();
        s.before_recent_ms = keep.checked_sub(1).map(|i| past[i].start_ms);
        s.first_seen_ms = past.first().map(|p| p.start_ms);
        s.window_counts = mm_artifact::features::WINDOWS_MS.map(|w| past.iter().filter(|p| p.start_ms >= as_of - w).count() as u32);
        s.churned_gaps = past.windows(2).filter(|w| w[1].start_ms - w[0].start_ms > horizon_h * 3_600_000).count() as u64;
        for p in &all[cut..] {
            s.record(*p, &spec);
        }
        let now = Upcoming { start_ms: all.last().unwrap().start_ms + later * 3_600_000, party: false, skill_percentile: 0.5 };
        // The documented limit: a match dropped from the kept history while inside a window
        // is not seen leaving it. Exact when no dropped match leaves a window it was counted in.
        let h = spec.history;
        let exact = (0..all.len().saturating_sub(h)).all(|i| {
            let dropped_at = if i + h < cut { as_of } else { all[i + h].start_ms.max(as_of) };
            mm_artifact::features::WINDOWS_MS.iter().all(|w| {
                !(all[i].start_ms >= dropped_at - w && all[i].start_ms < now.start_ms - w)
            })
        });
        prop_assume!(exact);
        let mut a = Vec::new();
        let mut b = Vec::new();
        spec.push_row(&all, &now, Outcome3::Loss, &mut a);
        s.push_features(&spec, &now, Outcome3::Loss, &mut b);
        prop_assert_eq!(a, b);
    }

    /// Any corruption of any file is refused with the file named, and never panics.
    #[test]
    fn corrupted_files_are_refused_and_named(file in 0usize..7, pos in any::<u64>(), byte in any::<u8>(), mode in 0u8..3) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        publish(&store, "v1", 20, 3);
        let names = ["manifest.json", "skill.json", PERCENTILES_FILE, TEAM_WIN_FILE, "party_adjustment.json", CHURN_FILE, PLAYERS_FILE];
        let path = dir.path().join("v1").join(names[file]);
        let mut bytes = fs::read(&path).unwrap();
        let i = (pos % bytes.len() as u64) as usize;
        match mode {
            0 => { prop_assume!(bytes[i] != byte); bytes[i] = byte; }
            1 => bytes.truncate(i),
            _ => bytes.insert(i, byte),
        }
        fs::write(&path, &bytes).unwrap();
        match Artifact::open(&dir.path().join("v1")) {
            // A manifest edit that changes nothing it describes (e.g. whitespace) still loads.
            Ok(_) => prop_assert_eq!(file, 0),
            Err(e) => {
                let shown = e.to_string();
                prop_assert!(shown.contains(names[file]) || (file == 0 && shown.contains("v1")), "{}", shown);
                if file > 0 {
                    let checksum_or_size = matches!(e.problem, Problem::Checksum { .. } | Problem::Size { .. });
                    prop_assert!(checksum_or_size, "{}", shown);
                }
            }
        }
    }
}

/// Rewrites a JSON file of a published version and its manifest entry, so that only the
/// content check (not the checksum) can refuse it.
fn rewrite(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join(name);
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    let bytes = serde_json::to_vec_pretty(&v).unwrap();
    fs::write(&path, &bytes).unwrap();
    if name != "manifest.json" {
        let mpath = dir.join("manifest.json");
        let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&mpath).unwrap()).unwrap();
        for f in m["files"].as_array_mut().unwrap() {
            if f["path"] == name {
                let e = mm_artifact::manifest::FileEntry::of(name, &bytes);
                f["bytes"] = e.bytes.into();
                f["sha256"] = e.sha256.into();
            }
        }
        fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    }
}

fn refused(edit: impl FnOnce(&Path)) -> mm_artifact::ArtifactError {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    publish(&store, "v1", 5, 4);
    let v = dir.path().join("v1");
    edit(&v);
    Artifact::open(&v).unwrap_err()
}

#[test]
fn content_problems_are_named() {
    let e = refused(|v| fs::remove_file(v.join(PLAYERS_FILE)).unwrap());
    assert_eq!(e.problem, Problem::Missing);
    assert!(e.file.ends_with(PLAYERS_FILE));

    let e = refused(|v| rewrite(v, "manifest.json", |m| m["format_version"] = 0.into()));
    assert!(
        matches!(e.problem, Problem::FormatVersion { found: 0, .. }),
        "{e}"
    );
    let newer = mm_artifact::FORMAT_VERSION + 1;
    let e = refused(|v| {
        rewrite(v, "manifest.json", |m| {
            m["min_reader_format"] = newer.into()
        })
    });
    assert!(
        e.to_string().contains(&format!(
            "this reader reads formats 1 to {}",
            mm_artifact::FORMAT_VERSION
        )),
        "{e}"
    );

    let e = refused(|v| {
        rewrite(v, CHURN_FILE, |c| {
            c["model"]["spec"]["outcome_pattern"] = 30.into();
        })
    });
    assert!(e.to_string().contains("outcome_pattern 30"), "{e}");

    let e = refused(|v| {
        rewrite(v, CHURN_FILE, |c| {
            c["model"]["coef"].as_array_mut().unwrap().pop();
        })
    });
    assert!(
        matches!(
            e.problem,
            Problem::FeatureMismatch {
                what: "coefficients",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.file.ends_with(CHURN_FILE));

    // JSON has no NaN; an overflowing literal is how a non-finite number arrives.
    let e = refused(|v| {
        let p = v.join(CHURN_FILE);
        let s = fs::read_to_string(&p).unwrap().replacen(
            "\"intercept\": ",
            "\"intercept\": 1e999, \"x\": ",
            1,
        );
        fs::write(&p, &s).unwrap();
        rewrite(v, "manifest.json", |m| {
            for f in m["files"].as_array_mut().unwrap() {
                if f["path"] == CHURN_FILE {
                    let e = mm_artifact::manifest::FileEntry::of(CHURN_FILE, s.as_bytes());
                    f["bytes"] = e.bytes.into();
                    f["sha256"] = e.sha256.into();
                }
            }
        });
    });
    assert!(e.file.ends_with(CHURN_FILE), "{e}");

    let e = refused(|v| {
        rewrite(v, PERCENTILES_FILE, |p| {
            p["skill"].as_array_mut().unwrap().reverse();
        })
    });
    assert!(e.to_string().contains("non-decreasing"), "{e}");

    let e = refused(|v| {
        rewrite(v, "manifest.json", |m| {
            m["feature_names"].as_array_mut().unwrap().swap(0, 1);
        })
    });
    assert!(e.to_string().contains("feature_names differ"), "{e}");

    let e = refused(|v| rewrite(v, TEAM_WIN_FILE, |t| t["skill_coef"] = "high".into()));
    assert!(
        matches!(e.problem, Problem::Parse(_)) && e.file.ends_with(TEAM_WIN_FILE),
        "{e}"
    );
}

#[test]
fn promote_rollback_and_hot_reload() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    publish(&store, "v1", 10, 1);
    let reloader = Reloader::start(store.clone()).unwrap();
    assert!(matches!(reloader.check(), Reload::Unchanged));
    publish(&store, "v2", 20, 2);
    assert!(matches!(reloader.check(), Reload::Swapped { ref to, .. } if to == "v2"));
    assert_eq!(reloader.current().snapshot.len(), 20);

    // A bad v3 is promoted behind the loader's back: it keeps v2 and says why.
    let (m, files) = synthetic::artifact(30, 3);
    store.publish("v3", m, &files, false, None).unwrap();
    fs::write(dir.path().join("v3").join(CHURN_FILE), b"{}").unwrap();
    assert!(store.promote("v3").is_err(), "promote verifies first");
    fs::write(dir.path().join("LATEST"), b"v3\n").unwrap();
    match reloader.check() {
        Reload::Kept { current, error } => {
            assert_eq!(current, "v2");
            assert!(error.file.ends_with(CHURN_FILE), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(reloader.current().manifest.model_version, "v2");

    // Rollback walks the promotions back: v3 was never promoted, so from v3 it goes to v2,
    // then to v1, then there is nothing left.
    assert_eq!(store.rollback().unwrap(), "v2");
    assert_eq!(store.rollback().unwrap(), "v1");
    assert!(store.rollback().is_err());
    assert_eq!(store.latest().unwrap().as_deref(), Some("v1"));
}

/// The committed artifact of every format version still loads.
#[test]
fn committed_artifacts_of_every_format_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/artifacts");
    let mut seen = 0;
    for e in fs::read_dir(&root).unwrap() {
        let dir = e.unwrap().path();
        let a = Artifact::open(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(!a.snapshot.is_empty());
        seen += 1;
    }
    assert!(seen >= mm_artifact::FORMAT_VERSION as usize);
}

/// Each older format loads with the defaults models/README.md promises for what it lacks:
/// format 1 has no `first_seen_ms` (null) and a churn model without `data_start_ms`; formats 1
/// and 2 have no `churned_gaps` (0) and no churn history features; formats 1 to 3 no outcome
/// pattern; formats 1 to 4 no win skill (the team model reads raw skill); formats 1 to 5 no
/// blowout terms (every loss alike); formats 1 to 6 no win-skill update (the win skill stays
/// the snapshot's between fits). Each newer format is
/// checked to carry what it added, so that a default applied to every format fails here.
#[test]
fn older_formats_load_with_the_promised_defaults() {
    use mm_artifact::team::SkillBasis;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/artifacts");
    for k in 1..=mm_artifact::FORMAT_VERSION {
        let a = Artifact::open(&root.join(format!("format-{k}"))).unwrap();
        assert_eq!(a.manifest.format_version, k);
        let players: Vec<_> = (0..a.snapshot.len())
            .map(|i| a.snapshot.player(i))
            .collect();
        let spec = &a.churn.model.spec;
        let known = players.iter().filter(|p| p.first_seen_ms.is_some()).count();
        if k == 1 {
            assert_eq!(known, 0, "format 1: first_seen_ms null");
            assert_eq!(spec.data_start_ms, None, "format 1: no data start");
        } else {
            assert_eq!(known, players.len(), "format {k} records first_seen_ms");
            assert!(spec.data_start_ms.is_some(), "format {k}");
        }
        let gaps: u64 = players.iter().map(|p| p.churned_gaps).sum();
        if k <= 2 {
            assert_eq!(gaps, 0, "format {k}: churned_gaps 0");
            assert_eq!(spec.past_churn_horizon_ms, None, "format {k}");
        } else {
            assert!(gaps > 0, "format {k} records churned gaps");
        }
        if k <= 3 {
            assert_eq!(spec.outcome_pattern, 0, "format {k}: no outcome pattern");
        }
        if k <= 5 {
            assert!(
                a.churn.model.blowout.is_none(),
                "format {k}: no blowout shift"
            );
            assert!(
                a.team_win.as_ref().is_none_or(|t| t.blowout.is_none()),
                "format {k}: no blowout model"
            );
        } else {
            assert!(
                a.churn.model.blowout.is_some(),
                "format {k}: a blowout shift"
            );
            assert!(
                a.team_win.as_ref().is_some_and(|t| t.blowout.is_some()),
                "format {k}: a blowout model"
            );
        }
        if k <= 4 {
            assert!(!a.snapshot.has_win_skill(), "format {k}: no win skill");
            assert!(
                a.team_win
                    .as_ref()
                    .is_none_or(|t| t.basis == SkillBasis::RawSkill),
                "format {k}: the team model reads raw skill"
            );
        }
        if k <= 6 {
            assert!(a.skill.win_update.is_none(), "format {k}: no win update");
            assert!(!a.snapshot.has_win_mass(), "format {k}: no win mass");
        } else {
            assert!(a.skill.win_update.is_some(), "format {k}: a win update");
            assert!(
                players.iter().all(|p| p.win_mass > 0.0),
                "format {k}: every player has a mass"
            );
        }
    }
}

/// Format 5: a team win model that reads the win skill needs the snapshot's `win_skill`
/// column. Without it the artifact is refused, naming the snapshot; with it, each player's
/// outcome skill is their win skill, round-tripped through the file, and new players get 0.
#[test]
fn a_win_skill_model_needs_the_win_skill_column() {
    let e = refused(|v| rewrite(v, TEAM_WIN_FILE, |t| t["basis"] = "win-skill".into()));
    assert!(e.file.ends_with(PLAYERS_FILE), "{e}");
    assert!(e.to_string().contains("win_skill"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    let (m, mut files) = synthetic::artifact(50, 9);
    let history = FeatureSpec::default().history;
    let mut states = synthetic::player_states(50, history, m.snapshot_as_of_ms, 9);
    states.sort_by(|a, b| a.player_id.cmp(&b.player_id));
    for (k, s) in states.iter_mut().enumerate() {
        s.win_skill = k as f64 / 10.0 - 2.0;
    }
    for (name, bytes) in &mut files {
        if name == PLAYERS_FILE {
            *bytes = mm_artifact::snapshot::write_snapshot(
                history,
                &states,
                mm_artifact::snapshot::WinColumns::Skill,
            )
            .unwrap();
        } else if name == TEAM_WIN_FILE {
            let mut t: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            t["basis"] = "win-skill".into();
            *bytes = serde_json::to_vec_pretty(&t).unwrap();
        }
    }
    store.publish("v1", m, &files, true, None).unwrap();
    let art = store.open_latest().unwrap();
    assert!(art.snapshot.has_win_skill());
    for s in &states {
        let got = art.snapshot.get(&s.player_id).unwrap();
        assert_eq!(got.win_skill, s.win_skill);
        assert_eq!(art.outcome_skill(&got), s.win_skill);
        assert_ne!(art.outcome_skill(&got), got.raw_skill);
    }
    assert_eq!(art.outcome_skill(&art.player_or_new("newcomer")), 0.0);

    // The same snapshot under a raw-skill model: the column is there, raw skill is read.
    let raw = synthetic::artifact(50, 9);
    let plain = Store::new(dir.path().join("plain"));
    plain.publish("v1", raw.0, &raw.1, true, None).unwrap();
    let art = plain.open_latest().unwrap();
    assert!(!art.snapshot.has_win_skill());
    let p = art.snapshot.player(0);
    assert_eq!(art.outcome_skill(&p), p.raw_skill);
}

/// Format 7: `skill.json`'s `win_update` needs the snapshot's `win_mass` column; without it the
/// artifact is refused naming the snapshot, and a bad update is refused naming `skill.json`.
/// With both, masses round-trip through the file, and the live update moves the win skill of
/// the players of a finished match (and only theirs) and their mass.
#[test]
fn a_win_update_needs_the_mass_column_and_moves_the_win_skill() {
    use mm_artifact::online::{FinishedMatch, LiveUpdater, ResultRow};
    use mm_artifact::snapshot::WinColumns;
    let history = FeatureSpec::default().history;
    let update = serde_json::json!({
        "estimator": "performance", "penalty": 0.3, "half_life_days": 20.0, "centre": 0.1
    });
    let build = |columns: WinColumns, update: serde_json::Value| {
        let (m, mut files) = synthetic::artifact(50, 9);
        let mut states = synthetic::player_states(50, history, m.snapshot_as_of_ms, 9);
        states.sort_by(|a, b| a.player_id.cmp(&b.player_id));
        for (k, s) in states.iter_mut().enumerate() {
            s.win_skill = k as f64 / 50.0 - 0.5;
            s.win_mass = 1.0 + k as f64;
        }
        for (name, bytes) in &mut files {
            let mut edit_json = |f: &dyn Fn(&mut serde_json::Value)| {
                let mut t: serde_json::Value = serde_json::from_slice(bytes).unwrap();
                f(&mut t);
                *bytes = serde_json::to_vec_pretty(&t).unwrap();
            };
            match name.as_str() {
                PLAYERS_FILE => {
                    *bytes =
                        mm_artifact::snapshot::write_snapshot(history, &states, columns).unwrap();
                }
                TEAM_WIN_FILE => edit_json(&|t| t["basis"] = "win-skill".into()),
                "skill.json" => edit_json(&|t| t["win_update"] = update.clone()),
                _ => {}
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.publish("v1", m, &files, true, None).unwrap();
        let opened = Artifact::open(&dir.path().join("v1"));
        (dir, opened, states)
    };
    let (_d, e, _) = build(WinColumns::Skill, update.clone());
    let e = e.unwrap_err();
    assert!(e.file.ends_with(PLAYERS_FILE), "{e}");
    assert!(e.to_string().contains("win_mass"), "{e}");
    let mut bad = update.clone();
    bad["penalty"] = (-1.0).into();
    let (_d, e, _) = build(WinColumns::SkillAndMass, bad);
    let e = e.unwrap_err();
    assert!(
        e.file.ends_with("skill.json") && e.to_string().contains("penalty"),
        "{e}"
    );

    let (_d, art, states) = build(WinColumns::SkillAndMass, update);
    let art = art.unwrap();
    assert!(art.snapshot.has_win_mass());
    // A negative mass, or a non-finite win skill, is refused naming the player.
    for (k, bad) in [(0usize, -1.0), (1, f64::NAN)] {
        let mut s = states.clone();
        if k == 0 {
            s[5].win_mass = bad;
        } else {
            s[5].win_skill = bad;
        }
        let bytes =
            mm_artifact::snapshot::write_snapshot(history, &s, WinColumns::SkillAndMass).unwrap();
        let e = mm_artifact::snapshot::parse_snapshot(
            Path::new(PLAYERS_FILE),
            bytes.into(),
            history,
            art.manifest.snapshot_as_of_ms,
            1,
        )
        .unwrap_err();
        let field = if k == 0 { "win_mass" } else { "win_skill" };
        assert!(e.to_string().contains(&s[5].player_id), "{e}");
        assert!(e.to_string().contains(field), "{e}");
    }
    for s in &states {
        let got = art.snapshot.get(&s.player_id).unwrap();
        assert_eq!((got.win_skill, got.win_mass), (s.win_skill, s.win_mass));
    }
    let (a, b) = (&states[3], &states[40]);
    let row = |id: &str, team, outcome, kills| ResultRow {
        stats: mm_artifact::skill::PerfColumns {
            kills: Some(kills),
            deaths_by_enemy: Some(2.0),
            ..Default::default()
        },
        ..ResultRow::new(id, team, outcome)
    };
    let m = FinishedMatch::new(
        "m1",
        art.manifest.snapshot_as_of_ms + 60_000,
        vec![
            row(&a.player_id, 0, mm_artifact::Outcome::Win, 9.0),
            row(&b.player_id, 1, mm_artifact::Outcome::Loss, 0.0),
        ],
    );
    let mut live = LiveUpdater::new(&art).unwrap();
    let before = vec![
        art.player_or_new(&a.player_id),
        art.player_or_new(&b.player_id),
    ];
    let after = live.apply(&m, before.clone());
    // The weaker player outplayed the stronger one: both move towards it, and each mass grows
    // by its term of the match (2) after its decay to the match.
    assert!(after[0].win_skill > before[0].win_skill);
    assert!(after[1].win_skill < before[1].win_skill);
    for (x, y) in after.iter().zip(&before) {
        assert!(x.win_mass > 2.0 && x.win_mass < y.win_mass + 2.0, "{x:?}");
        assert_eq!(x.last_seen_ms, m.start_ms);
    }
}
