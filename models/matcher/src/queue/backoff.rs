//! Backoff: rules that loosen as a search waits.

use serde::{Deserialize, Serialize};

/// A piecewise-linear curve of search age (seconds): flat before the first point and after the
/// last. Rules read their allowance from it, so they loosen (or, for a quality threshold,
/// fall) as a search waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    /// `(age_s, value)`, ages strictly increasing.
    pub points: Vec<(f64, f64)>,
}

impl Backoff {
    /// # Panics
    /// When `points` is empty, not finite, or its ages do not increase: curves are configuration,
    /// checked where they are built.
    #[must_use]
    pub fn new(points: &[(f64, f64)]) -> Backoff {
        assert!(!points.is_empty(), "a backoff curve needs a point");
        assert!(
            points.iter().all(|p| p.0.is_finite() && p.1.is_finite()),
            "backoff points must be finite"
        );
        assert!(
            points.windows(2).all(|w| w[0].0 < w[1].0),
            "backoff ages must increase"
        );
        Backoff {
            points: points.to_vec(),
        }
    }

    /// The value at `age_s`.
    #[must_use]
    pub fn at(&self, age_s: f64) -> f64 {
        let p = &self.points;
        if age_s <= p[0].0 {
            return p[0].1;
        }
        for w in p.windows(2) {
            let ((a0, v0), (a1, v1)) = (w[0], w[1]);
            if age_s <= a1 {
                return v0 + (v1 - v0) * (age_s - a0) / (a1 - a0);
            }
        }
        p[p.len() - 1].1
    }

    /// The first age at which the value reaches at least `v` (rising curves), `None` if never.
    #[must_use]
    pub fn age_at_least(&self, v: f64) -> Option<f64> {
        self.first_age(|x| x >= v, v)
    }

    /// The first age at which the value falls to at most `v` (falling curves), `None` if never.
    #[must_use]
    pub fn age_at_most(&self, v: f64) -> Option<f64> {
        self.first_age(|x| x <= v, v)
    }

    fn first_age(&self, ok: impl Fn(f64) -> bool, v: f64) -> Option<f64> {
        let p = &self.points;
        if ok(p[0].1) {
            return Some(0.0);
        }
        for w in p.windows(2) {
            let ((a0, v0), (a1, v1)) = (w[0], w[1]);
            if ok(v1) {
                // Linear between the points: solve v0 + (v1 - v0) t = v.
                let t = if v1 == v0 { 0.0 } else { (v - v0) / (v1 - v0) };
                return Some(a0 + t.clamp(0.0, 1.0) * (a1 - a0));
            }
        }
        None
    }

    /// The fraction of its total change the curve has made by `age_s` (0 at the start, 1 at the
    /// last point): how far a rule has loosened, comparable across rules.
    #[must_use]
    pub fn progress(&self, age_s: f64) -> f64 {
        let (first, last) = (self.points[0].1, self.points[self.points.len() - 1].1);
        if first == last {
            return 1.0;
        }
        ((self.at(age_s) - first) / (last - first)).clamp(0.0, 1.0)
    }
}
