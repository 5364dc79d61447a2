//! Loading one version: the manifest first (format range), then every file against its size
//! and sha256, then the contents, each checked (finite numbers, feature names that match the
//! coefficients, a monotone percentile table). Every refusal names the file.

use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::churn::ChurnModel;
use crate::error::{ArtifactError, Problem};
use crate::manifest::{FORMAT_VERSION, Manifest, OLDEST_READABLE_FORMAT, sha256_hex};
use crate::percentile::PercentileMap;
use crate::skill::RawSkillParams;
use crate::snapshot::{Snapshot, parse_snapshot};
use crate::team::{PartyAdjustment, SkillBasis, TeamWinModel};

/// The parameter files of format 1.
pub const SKILL_FILE: &str = "skill.json";
pub const PERCENTILES_FILE: &str = "percentiles.json";
pub const TEAM_WIN_FILE: &str = "team_win.json";
pub const PARTY_FILE: &str = "party_adjustment.json";
pub const CHURN_FILE: &str = "churn.json";
pub const PLAYERS_FILE: &str = "players.parquet";
pub const FILES: [&str; 6] = [
    SKILL_FILE,
    PERCENTILES_FILE,
    TEAM_WIN_FILE,
    PARTY_FILE,
    CHURN_FILE,
    PLAYERS_FILE,
];

/// `skill.json`: how raw skill is updated after a match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillFile {
    /// The in-match performance metric the skill compares (e.g. `kills-per-enemy-death`).
    pub metric: String,
    pub raw_skill: RawSkillParams,
    /// The party adjustment the replay credited to party members when it updated their raw
    /// skill (`RawSkill::update_adjusted`'s offsets); absent: none. A service updating skills
    /// between retrains uses the same (format 5 files without it update with none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub party_offsets: Option<PartyAdjustment>,
    /// How a service and a continued retrain update the win skill after a match (format 7 on,
    /// with the snapshot's `win_mass`); absent: the win skill stays the snapshot's until the
    /// next full fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub win_update: Option<crate::skill::WinSkillUpdate>,
}

/// `churn.json`: the churn model and its label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChurnFile {
    /// Churn = no match within this long after a match (e.g. `8h`), and in milliseconds.
    pub horizon: String,
    pub horizon_ms: i64,
    /// A loss by more than this many team-score points is a blowout.
    pub blowout_margin: f64,
    pub model: ChurnModel,
}

/// A loaded, verified artifact.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub skill: SkillFile,
    pub percentiles: PercentileMap,
    /// `None` when the data had too few matches to fit it.
    pub team_win: Option<TeamWinModel>,
    pub party_adjustment: Option<PartyAdjustment>,
    pub churn: ChurnFile,
    pub snapshot: Snapshot,
}

/// A parameter file's bytes: pretty JSON and a final newline (what the exporter writes).
#[must_use]
pub fn json_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).unwrap_or_default();
    b.push(b'\n');
    b
}

/// Only the format fields, read before anything else so that a future format with other
/// fields is refused for its version, not for a parse error.
#[derive(Deserialize)]
struct FormatProbe {
    format_version: u32,
    min_reader_format: u32,
}

fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, ArtifactError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ArtifactError::new(path, Problem::Parse(e.to_string())))
}

fn check_finite<'a>(
    path: &Path,
    values: impl IntoIterator<Item = (String, &'a f64)>,
) -> Result<(), ArtifactError> {
    for (name, v) in values {
        if !v.is_finite() {
            return Err(ArtifactError::new(path, Problem::NonFinite(name)));
        }
    }
    Ok(())
}

fn invalid(path: &Path, m: impl Into<String>) -> ArtifactError {
    ArtifactError::new(path, Problem::Invalid(m.into()))
}

/// Reads and checks `manifest.json`.
///
/// # Errors
/// Missing, unreadable, a format outside this reader's range, or not a manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest, ArtifactError> {
    let path = dir.join("manifest.json");
    let bytes = fs::read(&path).map_err(|e| ArtifactError::io(&path, &e))?;
    let probe: FormatProbe = parse(&path, &bytes)?;
    if probe.format_version < OLDEST_READABLE_FORMAT || probe.min_reader_format > FORMAT_VERSION {
        return Err(ArtifactError::new(
            &path,
            Problem::FormatVersion {
                found: probe.format_version,
                min_reader: probe.min_reader_format,
                oldest: OLDEST_READABLE_FORMAT,
                newest: FORMAT_VERSION,
            },
        ));
    }
    let m: Manifest = parse(&path, &bytes)?;
    for f in &m.files {
        if f.path.contains('/') || f.path.contains('\\') || f.path.starts_with('.') {
            return Err(invalid(
                &path,
                format!("file name {:?} is not a plain name", f.path),
            ));
        }
    }
    Ok(m)
}

/// The manifest's entry of a file.
fn entry<'a>(
    dir: &Path,
    m: &'a Manifest,
    name: &str,
) -> Result<&'a crate::manifest::FileEntry, ArtifactError> {
    m.files.iter().find(|f| f.path == name).ok_or_else(|| {
        invalid(
            &dir.join("manifest.json"),
            format!("{name} is not listed in the manifest"),
        )
    })
}

/// Reads one listed file and checks its size (not yet its checksum).
fn read_sized(dir: &Path, m: &Manifest, name: &str) -> Result<Vec<u8>, ArtifactError> {
    let path = dir.join(name);
    let entry = entry(dir, m, name)?;
    let bytes = fs::read(&path).map_err(|e| ArtifactError::io(&path, &e))?;
    if bytes.len() as u64 != entry.bytes {
        return Err(ArtifactError::new(
            &path,
            Problem::Size {
                expected: entry.bytes,
                actual: bytes.len() as u64,
            },
        ));
    }
    Ok(bytes)
}

fn check_sum(dir: &Path, m: &Manifest, name: &str, bytes: &[u8]) -> Result<(), ArtifactError> {
    let entry = entry(dir, m, name)?;
    let sum = sha256_hex(bytes);
    if sum == entry.sha256 {
        Ok(())
    } else {
        Err(ArtifactError::new(
            dir.join(name),
            Problem::Checksum {
                expected: entry.sha256.clone(),
                actual: sum,
            },
        ))
    }
}

/// Reads one listed file and checks its size and sha256.
fn read_verified(dir: &Path, m: &Manifest, name: &str) -> Result<Vec<u8>, ArtifactError> {
    let bytes = read_sized(dir, m, name)?;
    check_sum(dir, m, name, &bytes)?;
    Ok(bytes)
}

/// Every coefficient of the team win model (and of its draw and blowout models) is finite.
fn check_team_win(path: &Path, t: &TeamWinModel) -> Result<(), ArtifactError> {
    let d = t
        .draw
        .map_or([0.0, 0.0], |d| [d.intercept, d.abs_diff_coef]);
    let b = t
        .blowout
        .map_or([0.0, 0.0, 0.0], |b| [b.margin, b.intercept, b.coef]);
    check_finite(
        path,
        [
            ("skill_coef".to_string(), &t.skill_coef),
            ("party_members_coef".to_string(), &t.party_members_coef),
            ("party_spread_coef".to_string(), &t.party_spread_coef),
            ("draw.intercept".to_string(), &d[0]),
            ("draw.abs_diff_coef".to_string(), &d[1]),
            ("blowout.margin".to_string(), &b[0]),
            ("blowout.intercept".to_string(), &b[1]),
            ("blowout.coef".to_string(), &b[2]),
        ],
    )
}

fn check_churn(
    path: &Path,
    c: &ChurnFile,
    manifest_names: &[String],
    mpath: &Path,
) -> Result<(), ArtifactError> {
    let m = &c.model;
    let names = m.feature_names.len();
    for (what, len) in [
        ("coefficients", m.coef.len()),
        ("means", m.mean.len()),
        ("scales", m.scale.len()),
    ] {
        if len != names {
            return Err(ArtifactError::new(
                path,
                Problem::FeatureMismatch {
                    names,
                    values: len,
                    what,
                },
            ));
        }
    }
    m.spec.check().map_err(|why| invalid(path, why))?;
    if m.spec.names() != m.feature_names {
        return Err(invalid(
            path,
            format!(
                "the feature names are not those of a history of {} matches",
                m.spec.history
            ),
        ));
    }
    if manifest_names != m.feature_names.as_slice() {
        return Err(invalid(mpath, "feature_names differ from churn.json's"));
    }
    let f = m.feature_names.iter();
    check_finite(
        path,
        f.clone()
            .zip(&m.coef)
            .map(|(n, v)| (format!("coefficient of {n}"), v))
            .chain(
                f.clone()
                    .zip(&m.mean)
                    .map(|(n, v)| (format!("mean of {n}"), v)),
            )
            .chain(f.zip(&m.scale).map(|(n, v)| (format!("scale of {n}"), v)))
            .chain([
                ("intercept".to_string(), &m.intercept),
                ("c".to_string(), &m.c),
                ("blowout_margin".to_string(), &c.blowout_margin),
            ])
            .chain(m.blowout.iter().flat_map(|b| {
                [
                    ("blowout.close".to_string(), &b.close),
                    ("blowout.blowout".to_string(), &b.blowout),
                ]
            })),
    )?;
    if let Some((n, _)) = m
        .feature_names
        .iter()
        .zip(&m.scale)
        .find(|(_, s)| **s <= 0.0)
    {
        return Err(invalid(path, format!("scale of {n} is not positive")));
    }
    if c.horizon_ms <= 0 {
        return Err(invalid(path, "horizon_ms is not positive"));
    }
    Ok(())
}

impl Artifact {
    /// The snapshot's state of `player_id`, or, for a player it does not hold, a new player's
    /// as of the snapshot: raw skill 0, at that skill's percentile, win skill 0, no games. The one
    /// definition of "a new player" that the matcher, the pools and the evaluation share.
    #[must_use]
    pub fn player_or_new(&self, player_id: &str) -> crate::snapshot::PlayerState {
        self.snapshot
            .get(player_id)
            .unwrap_or_else(|| self.new_player(player_id))
    }

    /// A new player's state as of the snapshot (see [`Artifact::player_or_new`]).
    #[must_use]
    pub fn new_player(&self, player_id: &str) -> crate::snapshot::PlayerState {
        crate::snapshot::PlayerState::new_player(
            player_id,
            self.manifest.snapshot_as_of_ms,
            self.percentiles.percentile(0.0),
            0.0,
        )
    }

    /// The skill the team win model reads of `state` (its [`TeamWinModel::basis`]; raw skill
    /// without a team model).
    #[must_use]
    pub fn outcome_skill(&self, state: &crate::snapshot::PlayerState) -> f64 {
        match self.team_win.map(|t| t.basis) {
            Some(SkillBasis::WinSkill) => state.win_skill,
            _ => state.raw_skill,
        }
    }

    /// Loads and verifies the artifact in `dir`.
    ///
    /// # Errors
    /// Names the file and the problem: missing, size or checksum mismatch, format version
    /// outside the readable range, not parseable, feature names that do not match the
    /// coefficients, a non-finite number, an invalid table or snapshot.
    pub fn open(dir: &Path) -> Result<Artifact, ArtifactError> {
        Self::open_with_threads(dir, 2)
    }

    /// [`Artifact::open`], reading the snapshot on `threads` threads.
    ///
    /// # Errors
    /// See [`Artifact::open`].
    pub fn open_with_threads(dir: &Path, threads: usize) -> Result<Artifact, ArtifactError> {
        let manifest = read_manifest(dir)?;
        let mpath = dir.join("manifest.json");
        if manifest.files.len() != FILES.len() {
            let extra: Vec<&str> = manifest
                .files
                .iter()
                .map(|f| f.path.as_str())
                .filter(|p| !FILES.contains(p))
                .collect();
            if !extra.is_empty() {
                return Err(invalid(
                    &mpath,
                    format!("unknown files listed: {}", extra.join(", ")),
                ));
            }
        }
        let p = |n: &str| dir.join(n);
        let skill: SkillFile = parse(&p(SKILL_FILE), &read_verified(dir, &manifest, SKILL_FILE)?)?;
        skill
            .raw_skill
            .check()
            .map_err(|e| invalid(&p(SKILL_FILE), e.to_string()))?;
        if let Some(u) = &skill.win_update {
            u.check()
                .map_err(|e| invalid(&p(SKILL_FILE), format!("win_update: {e}")))?;
        }
        let percentiles: PercentileMap = parse(
            &p(PERCENTILES_FILE),
            &read_verified(dir, &manifest, PERCENTILES_FILE)?,
        )?;
        let pp = p(PERCENTILES_FILE);
        check_finite(
            &pp,
            percentiles
                .skill
                .iter()
                .enumerate()
                .map(|(k, v)| (format!("knot {k}"), v)),
        )?;
        if percentiles.skill.len() < 2 || percentiles.skill.windows(2).any(|w| w[1] < w[0]) {
            return Err(invalid(
                &pp,
                "the table needs at least 2 non-decreasing knots",
            ));
        }
        let tp = p(TEAM_WIN_FILE);
        let team_win: Option<TeamWinModel> =
            parse(&tp, &read_verified(dir, &manifest, TEAM_WIN_FILE)?)?;
        if let Some(t) = &team_win {
            check_team_win(&tp, t)?;
        }
        let ap = p(PARTY_FILE);
        let party_adjustment: Option<PartyAdjustment> =
            parse(&ap, &read_verified(dir, &manifest, PARTY_FILE)?)?;
        if let Some(a) = &party_adjustment {
            check_finite(
                &ap,
                [
                    ("per_member".to_string(), &a.per_member),
                    ("per_member_per_sd".to_string(), &a.per_member_per_sd),
                ],
            )?;
        }
        let cp = p(CHURN_FILE);
        let churn: ChurnFile = parse(&cp, &read_verified(dir, &manifest, CHURN_FILE)?)?;
        check_churn(&cp, &churn, &manifest.feature_names, &mpath)?;
        // The snapshot is the big file: its checksum is computed while it is parsed, and a
        // mismatch wins over any parse error (a corrupted file is reported as corrupted).
        let players = bytes::Bytes::from(read_sized(dir, &manifest, PLAYERS_FILE)?);
        let (sum, parsed) = std::thread::scope(|s| {
            let hashing = s.spawn(|| check_sum(dir, &manifest, PLAYERS_FILE, &players));
            let parsed = parse_snapshot(
                &p(PLAYERS_FILE),
                players.clone(),
                churn.model.spec.history,
                manifest.snapshot_as_of_ms,
                threads,
            );
            let sum = hashing.join().unwrap_or_else(|_| {
                Err(ArtifactError::new(
                    p(PLAYERS_FILE),
                    Problem::Io("the checksum thread panicked".into()),
                ))
            });
            (sum, parsed)
        });
        sum?;
        let snapshot = parsed?;
        if team_win.is_some_and(|t| t.basis == SkillBasis::WinSkill) && !snapshot.has_win_skill() {
            return Err(invalid(
                &p(PLAYERS_FILE),
                format!(
                    "{TEAM_WIN_FILE} reads the win skill, and the snapshot has no win_skill column"
                ),
            ));
        }
        if skill.win_update.is_some() && !snapshot.has_win_mass() {
            return Err(invalid(
                &p(PLAYERS_FILE),
                format!(
                    "{SKILL_FILE} updates the win skill after a match (win_update), and the \
                     snapshot has no win_mass column"
                ),
            ));
        }
        Ok(Artifact {
            dir: dir.to_path_buf(),
            manifest,
            skill,
            percentiles,
            team_win,
            party_adjustment,
            churn,
            snapshot,
        })
    }
}
