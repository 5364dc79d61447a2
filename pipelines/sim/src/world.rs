//! The population: regions, players, friend groups.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal, Normal};

/// A server region with a population share, a centre and a UTC offset for play schedules.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    pub name: &'static str,
    pub lat: f64,
    pub lon: f64,
    pub utc_offset_h: f64,
    pub share: f64,
    /// Regions of one group are merged when searches back off.
    pub group: u8,
}

/// A world mix in the shape of a western online shooter's player base.
pub const REGIONS: [Region; 8] = [
    Region {
        name: "na-east",
        lat: 40.7,
        lon: -74.0,
        utc_offset_h: -5.0,
        share: 0.22,
        group: 0,
    },
    Region {
        name: "na-west",
        lat: 37.8,
        lon: -122.4,
        utc_offset_h: -8.0,
        share: 0.13,
        group: 0,
    },
    Region {
        name: "eu-west",
        lat: 51.5,
        lon: -0.1,
        utc_offset_h: 0.0,
        share: 0.25,
        group: 1,
    },
    Region {
        name: "eu-east",
        lat: 52.2,
        lon: 21.0,
        utc_offset_h: 2.0,
        share: 0.10,
        group: 1,
    },
    Region {
        name: "south-america",
        lat: -23.5,
        lon: -46.6,
        utc_offset_h: -3.0,
        share: 0.10,
        group: 0,
    },
    Region {
        name: "asia",
        lat: 35.7,
        lon: 139.7,
        utc_offset_h: 9.0,
        share: 0.12,
        group: 2,
    },
    Region {
        name: "oceania",
        lat: -33.9,
        lon: 151.2,
        utc_offset_h: 10.0,
        share: 0.04,
        group: 2,
    },
    Region {
        name: "middle-east",
        lat: 25.2,
        lon: 55.3,
        utc_offset_h: 4.0,
        share: 0.04,
        group: 1,
    },
];

pub const DEVICES: [&str; 2] = ["controller", "mouse-keyboard"];
pub const PLATFORMS: [&str; 2] = ["console", "pc"];

/// Which mode a player plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// 6v6 team deathmatch.
    Tdm,
    /// 1v1 with win, draw or loss.
    Duel,
}

impl Mode {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Mode::Tdm => "tdm-6v6",
            Mode::Duel => "duel-1v1",
        }
    }
}

/// One simulated player: fixed traits and the state the simulation moves.
#[derive(Debug, Clone)]
pub struct Player {
    pub region: u8,
    pub lat: f64,
    pub lon: f64,
    pub device: u8,
    pub platform: u8,
    pub mode: Mode,
    pub group: u32,
    /// Latent skill (standard normal at the start), drifting slowly.
    pub skill: f64,
    pub skill_start: f64,
    /// Individual propensity to stop (logit scale).
    pub quit_base: f64,
    /// Sessions per day when active.
    pub sessions_per_day: f64,
    /// Preferred local hour to start playing.
    pub pref_hour: f64,
    pub prior_games: u32,
    /// Matches played (prior plus simulated).
    pub games: u32,
    /// The last three outcomes, newest first (0 win, 1 draw, 2 loss); `hist_len` are valid.
    pub hist: [u8; 3],
    pub hist_len: u8,
    /// Matches in the current session.
    pub session_matches: u32,
    /// Incremented whenever a pending session start is superseded.
    pub epoch: u32,
    /// Whether the player is in a session (queued or playing) right now.
    pub in_session: bool,
    /// When an offline player's next session is due (seconds from the start).
    pub next_start: i64,
}

impl Player {
    /// Pushes an outcome onto the recent history.
    pub fn record(&mut self, outcome: u8) {
        self.hist = [outcome, self.hist[0], self.hist[1]];
        self.hist_len = (self.hist_len + 1).min(3);
        self.games += 1;
        self.session_matches += 1;
    }

    /// The probability of skipping a day between sessions.
    #[must_use]
    pub fn skip_day(&self) -> f64 {
        (-self.sessions_per_day).exp().clamp(0.05, 0.9)
    }
}

/// Draws the population: friend groups of correlated skill in one region, then players.
pub fn population(n: usize, duel_share: f64, rng: &mut ChaCha8Rng) -> Vec<Player> {
    let normal = Normal::new(0.0, 1.0).expect("valid normal");
    let rate = LogNormal::new(-0.3, 0.5).expect("valid lognormal");
    let prior = LogNormal::new(3.0, 1.5).expect("valid lognormal");
    let mut players = Vec::with_capacity(n);
    let mut group = 0u32;
    while players.len() < n {
        // Friend-group sizes: a third alone, the rest 2-6 with larger groups rarer.
        let size = match rng.random::<f64>() {
            x if x < 0.35 => 1,
            x if x < 0.60 => 2,
            x if x < 0.78 => 3,
            x if x < 0.90 => 4,
            x if x < 0.96 => 5,
            _ => 6,
        }
        .min(n - players.len());
        let region = pick_region(rng);
        let centre: f64 = normal.sample(rng);
        let mode = if rng.random::<f64>() < duel_share {
            Mode::Duel
        } else {
            Mode::Tdm
        };
        // Friends keep similar hours and play on the same days.
        let hour = 20.0 + 2.5 * normal.sample(rng);
        let sessions_per_day = rate.sample(rng);
        for _ in 0..size {
            // Friends' skills correlate (0.6) around the group's centre.
            let skill = 0.6 * centre + 0.8 * normal.sample(rng);
            let r = &REGIONS[region as usize];
            let platform = u8::from(rng.random::<f64>() < 0.45);
            let device = if platform == 0 {
                0
            } else {
                u8::from(rng.random::<f64>() < 0.78)
            };
            let new_player = rng.random::<f64>() < 0.15;
            let prior_games = if new_player {
                0
            } else {
                prior.sample(rng) as u32
            };
            players.push(Player {
                region,
                lat: (r.lat + 3.0 * normal.sample(rng)).clamp(-89.0, 89.0),
                lon: wrap_lon(r.lon + 4.0 * normal.sample(rng)),
                device,
                platform,
                mode,
                group,
                skill,
                skill_start: skill,
                quit_base: 0.35 * normal.sample(rng),
                sessions_per_day,
                pref_hour: (hour + 0.1 * normal.sample(rng)).rem_euclid(24.0),
                prior_games,
                games: prior_games,
                hist: [0; 3],
                hist_len: 0,
                session_matches: 0,
                epoch: 0,
                in_session: false,
                next_start: i64::MAX,
            });
        }
        group += 1;
    }
    players
}

fn pick_region(rng: &mut ChaCha8Rng) -> u8 {
    let mut x = rng.random::<f64>();
    for (i, r) in REGIONS.iter().enumerate() {
        if x < r.share {
            return i as u8;
        }
        x -= r.share;
    }
    (REGIONS.len() - 1) as u8
}

fn wrap_lon(lon: f64) -> f64 {
    (lon + 180.0).rem_euclid(360.0) - 180.0
}

/// Great-circle distance in km.
#[must_use]
pub fn distance_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6371.0 * a.sqrt().asin()
}
