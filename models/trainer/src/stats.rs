//! Small statistics shared by the fits and their tests.

/// Spearman rank correlation of two equally long samples (ordinal ranks; ties keep input
/// order). `NaN` for fewer than two values.
#[must_use]
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "spearman: samples of different lengths");
    let rank = |v: &[f64]| {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|&x, &y| v[x].total_cmp(&v[y]));
        let mut r = vec![0.0; v.len()];
        for (k, &i) in idx.iter().enumerate() {
            r[i] = k as f64;
        }
        r
    };
    let (ra, rb) = (rank(a), rank(b));
    let m = (a.len() as f64 - 1.0) / 2.0;
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - m) * (y - m)).sum();
    cov / ra.iter().map(|x| (x - m).powi(2)).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotone_is_one_and_reversed_is_minus_one() {
        let a = [1.0, 5.0, 2.0, 9.0];
        assert!((spearman(&a, &[10.0, 50.0, 20.0, 90.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[-1.0, -5.0, -2.0, -9.0]) + 1.0).abs() < 1e-12);
        // Hand case: ranks (0, 1, 2) vs (0, 2, 1): 1 - 6 * 2 / (3 * 8) = 0.5.
        assert!((spearman(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]) - 0.5).abs() < 1e-12);
    }
}
