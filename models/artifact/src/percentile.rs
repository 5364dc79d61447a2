//! The percentile map (CoD "Skill Percentiles"): a quantile table of the active population's raw
//! skill, with linear interpolation between knots, monotone by construction.

use serde::{Deserialize, Serialize};

/// Quantile knots: `skill[k]` is the `k / (len - 1)` quantile of the population.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PercentileMap {
    pub skill: Vec<f64>,
}

impl PercentileMap {
    /// Builds a table of `knots` quantiles (at least 2) from finite skills; None when empty.
    #[must_use]
    pub fn fit(skills: &[f64], knots: usize) -> Option<PercentileMap> {
        let mut v: Vec<f64> = skills.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() || knots < 2 {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let last = (v.len() - 1) as f64;
        let skill = (0..knots)
            .map(|k| {
                let pos = last * k as f64 / (knots - 1) as f64;
                let lo = pos.floor() as usize;
                let hi = pos.ceil() as usize;
                v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
            })
            .collect();
        Some(PercentileMap { skill })
    }

    /// The percentile (in [0, 1]) of a raw skill value: the interpolated inverse of the table.
    #[must_use]
    pub fn percentile(&self, x: f64) -> f64 {
        let s = &self.skill;
        let n = s.len();
        if x <= s[0] {
            return 0.0;
        }
        if x >= s[n - 1] {
            return 1.0;
        }
        // The first knot above x.
        let hi = s.partition_point(|&k| k <= x);
        let lo = hi - 1;
        let frac = if s[hi] > s[lo] {
            (x - s[lo]) / (s[hi] - s[lo])
        } else {
            0.0
        };
        (lo as f64 + frac) / (n - 1) as f64
    }

    /// The raw skill at a percentile (in [0, 1]).
    #[must_use]
    pub fn skill_at(&self, p: f64) -> f64 {
        let s = &self.skill;
        let pos = p.clamp(0.0, 1.0) * (s.len() - 1) as f64;
        let lo = pos.floor() as usize;
        let hi = (lo + 1).min(s.len() - 1);
        s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_case_and_monotone() {
        let m = PercentileMap::fit(&[0.0, 1.0, 2.0, 3.0, 4.0], 5).unwrap();
        assert_eq!(m.skill, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert!((m.percentile(2.5) - 0.625).abs() < 1e-12);
        assert!((m.skill_at(0.625) - 2.5).abs() < 1e-12);
        assert_eq!(m.percentile(-9.0), 0.0);
        assert_eq!(m.percentile(9.0), 1.0);
        let mut last = -1.0;
        for k in 0..=100 {
            let p = m.percentile(-0.5 + 0.05 * f64::from(k));
            assert!(p >= last);
            last = p;
        }
        assert!(PercentileMap::fit(&[], 5).is_none());
    }
}
