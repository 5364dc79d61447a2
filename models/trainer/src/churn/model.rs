//! The churn model: L2 logistic regression on standardised features, with the penalty chosen by
//! k-fold cross-validation whose folds are grouped by player (no player is in training and
//! validation at once).
//!
//! The penalty follows scikit-learn's convention: the loss is `C * sum of log-losses + |w|^2 / 2`
//! on standardised features, i.e. `sum of log-losses + alpha |w|^2 / 2` with `alpha = 1 / C`. The
//! intercept is not penalised. The solver is [`crate::logit::newton`] (Newton-CG on the exact
//! Hessian): the penalty is weighted by each feature's variance, which is the same fit as on
//! standardised features without a standardised copy of the table. linfa-logistic's L-BFGS
//! reaches the same optimum more slowly (`mm bench logistic` measures both).

use ndarray::ArrayView2;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::churn::features::FeatureSpec;
use crate::logit::newton::{NewtonFit, fit_newton_weighted_from};
use crate::stats::{BinaryScore, auc};
pub use mm_artifact::churn::{BlowoutShift, ChurnModel, GridPoint, standardised_logit};

/// How to fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChurnFitConfig {
    /// Inverse L2 strengths to try (scikit-learn's `C`).
    pub c_grid: Vec<f64>,
    pub folds: usize,
    /// Cross-validate on at most this many rows (whole players, a fixed hash sample); the
    /// final fit uses every row.
    pub cv_max_rows: usize,
    /// Newton iterations at most.
    pub max_iterations: u64,
    /// Stop when the objective changes by less than this per training row.
    pub tolerance_per_row: f64,
    /// The same for the cross-validation's fits, which only rank the penalties: their
    /// log-losses differ by far more than what a looser stop moves (about 1e-6 at 1e-8 a row,
    /// in half the Newton steps). The final fit runs to `tolerance_per_row`.
    #[serde(default = "cv_tolerance_default")]
    pub cv_tolerance_per_row: f64,
}

fn cv_tolerance_default() -> f64 {
    1e-8
}

impl Default for ChurnFitConfig {
    fn default() -> Self {
        ChurnFitConfig {
            c_grid: vec![1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0],
            folds: 5,
            cv_max_rows: 1_000_000,
            max_iterations: 100,
            tolerance_per_row: 1e-10,
            cv_tolerance_per_row: cv_tolerance_default(),
        }
    }
}

/// Why a churn fit failed.
#[derive(Debug, thiserror::Error)]
pub enum ChurnFitError {
    #[error("churn model: {0}")]
    Data(String),
    #[error("churn model: {0}")]
    Solver(String),
}

/// Column means and standard deviations (1 for a constant column).
fn standardiser(x: ArrayView2<'_, f64>) -> (Vec<f64>, Vec<f64>) {
    // Two passes over the rows (a pass per column strode across the whole table 2 d times);
    // each column's sums still run over the rows in order, so the figures are the same.
    let n = x.nrows() as f64;
    let mut sum = vec![0.0; x.ncols()];
    for row in x.rows() {
        for (s, &v) in sum.iter_mut().zip(row) {
            *s += v;
        }
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
    let mut sq = vec![0.0; x.ncols()];
    for row in x.rows() {
        for ((s, &v), m) in sq.iter_mut().zip(row).zip(&mean) {
            *s += (v - m).powi(2);
        }
    }
    let sd = sq
        .iter()
        .map(|s| s / n)
        .map(|v| if v > 1e-24 { v.sqrt() } else { 1.0 })
        .collect();
    (mean, sd)
}

/// Fits on raw rows with the penalty of standardised features; returns the standardiser and
/// the standardised `(coef, intercept)` for the class `true`.
fn logistic(
    x: ArrayView2<'_, f64>,
    y: &[bool],
    c: f64,
    cfg: &ChurnFitConfig,
    start: Option<&Standardised>,
) -> Result<Standardised, ChurnFitError> {
    logistic_with(x, y, c, (cfg, start), standardiser(x))
}

/// [`logistic`] with `x`'s standardiser already computed (a fold's rows serve every C).
fn logistic_with(
    x: ArrayView2<'_, f64>,
    y: &[bool],
    c: f64,
    (cfg, start): (&ChurnFitConfig, Option<&Standardised>),
    (mean, sd): (Vec<f64>, Vec<f64>),
) -> Result<Standardised, ChurnFitError> {
    let how = NewtonFit {
        alpha: 1.0 / c,
        intercept: true,
        max_iterations: cfg.max_iterations,
        tolerance_per_row: cfg.tolerance_per_row,
    };
    let weights: Vec<f64> = sd.iter().map(|s| s * s).collect();
    let r = fit_newton_weighted_from(
        x,
        y,
        &how,
        &weights,
        start.map(|s| (s.raw_coef.as_slice(), s.raw_intercept)),
    )
    .map_err(ChurnFitError::Solver)?;
    let coef: Vec<f64> = r.coef.iter().zip(&sd).map(|(w, s)| w * s).collect();
    let intercept = r.intercept + r.coef.iter().zip(&mean).map(|(w, m)| w * m).sum::<f64>();
    Ok(Standardised {
        mean,
        sd,
        coef,
        intercept,
        raw_coef: r.coef.to_vec(),
        raw_intercept: r.intercept,
    })
}

/// One fold's validation rows and, per penalty of the grid (in grid order), the predictions on
/// them (`None`: the fold has no validation rows or one class only in training).
type FoldPredictions = (Vec<usize>, Vec<Vec<f64>>);

/// Fits fold `f` of the cross-validation rows `cv_rows` (with their `fold`s) at every penalty of
/// the grid and predicts its validation rows.
fn fold_predictions(
    x: ArrayView2<'_, f64>,
    y: &[bool],
    (cv_rows, fold): (&[usize], &[usize]),
    f: usize,
    (cfg, cv): (&ChurnFitConfig, &ChurnFitConfig),
) -> Result<Option<FoldPredictions>, ChurnFitError> {
    let (tr, va): (Vec<usize>, Vec<usize>) = cv_rows
        .iter()
        .zip(fold)
        .map(|(&i, &fi)| (i, fi))
        .partition::<Vec<_>, _>(|&(_, fi)| fi != f)
        .map_pair(|v| v.into_iter().map(|(i, _)| i).collect());
    let yt: Vec<bool> = tr.iter().map(|&i| y[i]).collect();
    if va.is_empty() || yt.iter().all(|&v| v) || yt.iter().all(|&v| !v) {
        return Ok(None);
    }
    // One copy of the fold's training rows, and its standardiser, serve every C.
    let xt = x.select(ndarray::Axis(0), &tr);
    let moments = standardiser(xt.view());
    // The grid's penalties in increasing C, each fit started from the previous one's optimum
    // (the same convex problem with a neighbouring penalty): the optimum is the one a cold start
    // reaches, in fewer Newton steps.
    let mut order: Vec<usize> = (0..cfg.c_grid.len()).collect();
    order.sort_by(|&a, &b| cfg.c_grid[a].total_cmp(&cfg.c_grid[b]));
    let mut by_c = vec![Vec::new(); cfg.c_grid.len()];
    let mut previous: Option<Standardised> = None;
    for ci in order {
        let c = cfg.c_grid[ci];
        let t = std::time::Instant::now();
        let m = logistic_with(xt.view(), &yt, c, (cv, previous.as_ref()), moments.clone())?;
        tracing::info!(
            fold = f + 1,
            folds = cfg.folds,
            c,
            train_rows = tr.len(),
            seconds = (t.elapsed().as_secs_f64() * 100.0).round() / 100.0,
            "churn cross-validation: fold {} of {}, C = {c} fitted",
            f + 1,
            cfg.folds
        );
        by_c[ci] = va.iter().map(|&i| m.predict(x.row(i))).collect();
        previous = Some(m);
    }
    Ok(Some((va, by_c)))
}

/// `P = sigmoid(intercept + sum coef_k (x_k - mean_k) / sd_k)`.
struct Standardised {
    mean: Vec<f64>,
    sd: Vec<f64>,
    coef: Vec<f64>,
    intercept: f64,
    /// The same on the raw features (`P = sigmoid(raw_intercept + raw_coef . x)`): a warm
    /// start for the next penalty of the grid.
    raw_coef: Vec<f64>,
    raw_intercept: f64,
}

impl Standardised {
    fn predict(&self, row: ndarray::ArrayView1<'_, f64>) -> f64 {
        standardised_logit(row.iter(), &self.mean, &self.sd, &self.coef, self.intercept)
    }
}

/// A pair of vectors mapped alike.
trait MapPair<T> {
    fn map_pair<U>(self, f: impl Fn(T) -> U) -> (U, U);
}

impl<T> MapPair<T> for (T, T) {
    fn map_pair<U>(self, f: impl Fn(T) -> U) -> (U, U) {
        (f(self.0), f(self.1))
    }
}

/// A player's position in [0, 1), fixed by their id: the cross-validation subsample.
fn player_share(group: u32) -> f64 {
    let h = u64::from(group)
        .wrapping_add(0x2545_f491_4f6c_dd1d)
        .wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn fold_of(group: u32, folds: usize) -> usize {
    // A fixed mix of the group id, so folds do not follow id order.
    let h = u64::from(group)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_right(29);
    (h % folds as u64) as usize
}

/// The churned rows of `y`, which must hold both classes.
fn positives(y: &[bool]) -> Result<usize, ChurnFitError> {
    let pos = y.iter().filter(|&&v| v).count();
    if pos == 0 || pos == y.len() {
        return Err(ChurnFitError::Data(format!(
            "{pos} of {} rows churn: both classes are needed",
            y.len()
        )));
    }
    Ok(pos)
}

/// Fitting, which needs ndarray; the model itself is the artifact crate's.
pub trait FitChurnModel: Sized {
    /// Fits on `x` (rows of `spec`'s features), labels `y` and player `groups`.
    fn fit(
        spec: FeatureSpec,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        groups: &[u32],
        cfg: &ChurnFitConfig,
    ) -> Result<Self, ChurnFitError>;

    /// The same model (its spec, its C and the cross-validation that chose it) fitted again
    /// at that C on other rows, without cross-validation: the export's refit on every
    /// labelled row once the later window has scored the first fit.
    fn refit(
        &self,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        cfg: &ChurnFitConfig,
    ) -> Result<Self, ChurnFitError>;

    /// [`FitChurnModel::refit`] started from this model's coefficients (a daily run's refit on
    /// new rows: the optimum is the same as a cold start's, reached in fewer Newton steps when
    /// the new rows look like the old).
    fn refit_warm(
        &self,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        cfg: &ChurnFitConfig,
    ) -> Result<Self, ChurnFitError>;
}

/// The refits of [`FitChurnModel`], cold or from this model's coefficients.
trait RefitFrom: Sized {
    fn refit_from(
        &self,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        cfg: &ChurnFitConfig,
        warm: bool,
    ) -> Result<Self, ChurnFitError>;
}

impl RefitFrom for ChurnModel {
    fn refit_from(
        &self,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        cfg: &ChurnFitConfig,
        warm: bool,
    ) -> Result<ChurnModel, ChurnFitError> {
        if x.ncols() != self.feature_names.len() || x.nrows() != y.len() {
            return Err(ChurnFitError::Data(format!(
                "{} rows x {} columns, {} labels; the model has {} features",
                x.nrows(),
                x.ncols(),
                y.len(),
                self.feature_names.len()
            )));
        }
        let pos = positives(y)?;
        let start = warm.then(|| {
            let raw_coef: Vec<f64> = self
                .coef
                .iter()
                .zip(&self.scale)
                .map(|(c, s)| c / s)
                .collect();
            let shift: f64 = raw_coef.iter().zip(&self.mean).map(|(w, m)| w * m).sum();
            Standardised {
                mean: self.mean.clone(),
                sd: self.scale.clone(),
                coef: self.coef.clone(),
                intercept: self.intercept,
                raw_intercept: self.intercept - shift,
                raw_coef,
            }
        });
        let m = logistic(x, y, self.c, cfg, start.as_ref())?;
        Ok(ChurnModel {
            mean: m.mean,
            scale: m.sd,
            coef: m.coef,
            intercept: m.intercept,
            rows: y.len() as u64,
            positives: pos as u64,
            ..self.clone()
        })
    }
}

impl FitChurnModel for ChurnModel {
    fn refit(
        &self,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        cfg: &ChurnFitConfig,
    ) -> Result<ChurnModel, ChurnFitError> {
        self.refit_from(x, y, cfg, false)
    }

    fn refit_warm(
        &self,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        cfg: &ChurnFitConfig,
    ) -> Result<ChurnModel, ChurnFitError> {
        self.refit_from(x, y, cfg, true)
    }

    /// Fits on `x` (rows of `spec`'s features), labels `y` and player `groups`.
    fn fit(
        spec: FeatureSpec,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        groups: &[u32],
        cfg: &ChurnFitConfig,
    ) -> Result<ChurnModel, ChurnFitError> {
        let names = spec.names();
        if x.ncols() != names.len() || x.nrows() != y.len() || y.len() != groups.len() {
            return Err(ChurnFitError::Data(format!(
                "{} rows x {} columns, {} labels, {} groups; the spec has {} features",
                x.nrows(),
                x.ncols(),
                y.len(),
                groups.len(),
                names.len()
            )));
        }
        let pos = positives(y)?;
        check_grid(cfg)?;
        // Cross-validation on at most `cv_max_rows` rows: whole players, chosen by a hash.
        let keep = (cfg.cv_max_rows as f64 / y.len() as f64).min(1.0);
        let cv_rows: Vec<usize> = (0..y.len())
            .filter(|&i| keep >= 1.0 || player_share(groups[i]) < keep)
            .collect();
        let fold: Vec<usize> = cv_rows
            .iter()
            .map(|&i| fold_of(groups[i], cfg.folds))
            .collect();
        let k = cfg.c_grid.len();
        let mut scores = vec![BinaryScore::default(); k];
        let mut preds: Vec<Vec<f64>> = vec![Vec::new(); k];
        let mut labels = Vec::new();
        // The cross-validation's fits stop at their own, looser tolerance.
        let cv = ChurnFitConfig {
            tolerance_per_row: cfg.cv_tolerance_per_row,
            ..cfg.clone()
        };
        // The folds are fitted in parallel (each fit's own row ranges are parallel too, but
        // its Newton steps have serial parts) and merged in fold order: the same scores as
        // fitting them one after another. Each fold's log lines keep the caller's span (the
        // run and stage of a retrain), which the pool's threads do not inherit.
        let span = tracing::Span::current();
        let folds: Vec<Option<FoldPredictions>> = (0..cfg.folds)
            .into_par_iter()
            .map(|f| span.in_scope(|| fold_predictions(x, y, (&cv_rows, &fold), f, (cfg, &cv))))
            .collect::<Result<_, _>>()?;
        for (va, by_c) in folds.into_iter().flatten() {
            labels.extend(va.iter().map(|&i| y[i]));
            for (ci, ps) in by_c.iter().enumerate() {
                for (&i, &p) in va.iter().zip(ps) {
                    scores[ci].add(p, f64::from(u8::from(y[i])));
                    preds[ci].push(p);
                }
            }
        }
        let grid: Vec<GridPoint> = cfg
            .c_grid
            .iter()
            .zip(&scores)
            .zip(&preds)
            .map(|((&c, score), p)| GridPoint {
                c,
                cv_log_loss: score.metrics().log_loss,
                cv_auc: auc(p, &labels),
            })
            .collect();
        let cv_rows = cv_rows.len() as u64;
        let best = grid
            .iter()
            .filter(|g| g.cv_log_loss.is_finite())
            .min_by(|a, b| a.cv_log_loss.total_cmp(&b.cv_log_loss))
            .copied()
            .ok_or_else(|| ChurnFitError::Data("no fold could be fitted".into()))?;
        let m = logistic(x, y, best.c, cfg, None)?;
        Ok(ChurnModel {
            spec,
            feature_names: names,
            mean: m.mean,
            scale: m.sd,
            coef: m.coef,
            intercept: m.intercept,
            c: best.c,
            grid,
            rows: y.len() as u64,
            positives: pos as u64,
            cv_rows,
            blowout: None,
        })
    }
}

/// At least 2 folds and a non-empty grid of finite, positive C values.
fn check_grid(cfg: &ChurnFitConfig) -> Result<(), ChurnFitError> {
    if cfg.folds < 2
        || cfg.c_grid.is_empty()
        || cfg.c_grid.iter().any(|c| !c.is_finite() || *c <= 0.0)
    {
        return Err(ChurnFitError::Data(
            "at least 2 folds and a grid of positive C values".into(),
        ));
    }
    Ok(())
}

/// The fewest loss rows of each kind (close, blowout) for [`fit_blowout_shift`].
pub const MIN_SHIFT_ROWS: u64 = 20;

/// The model's churn after a close and after a blowout loss told apart ([`BlowoutShift`]), on
/// the rows of `x` whose upcoming outcome is a loss: `blowout[r]` says row `r`'s match was a
/// blowout. With the model's log-odds `z` of each row held fixed, `close` is the shift that
/// makes the close losses' mean prediction equal their churn rate (the maximum-likelihood
/// offset), and `close + blowout` the same for the blowout losses: two one-dimensional fits,
/// each the root of a monotone function. `None` with fewer than [`MIN_SHIFT_ROWS`] rows of
/// either kind.
///
/// # Errors
/// Mismatched lengths.
pub fn fit_blowout_shift(
    model: &ChurnModel,
    x: ArrayView2<'_, f64>,
    y: &[bool],
    blowout: &[bool],
) -> Result<Option<BlowoutShift>, ChurnFitError> {
    if x.nrows() != y.len() || y.len() != blowout.len() || x.ncols() != model.coef.len() {
        return Err(ChurnFitError::Data(format!(
            "{} rows x {} columns, {} labels, {} blowout flags; the model has {} features",
            x.nrows(),
            x.ncols(),
            y.len(),
            blowout.len(),
            model.coef.len()
        )));
    }
    let loss = model.spec.outcome_columns()[2];
    let mut groups: [(Vec<f64>, u64); 2] = [(Vec::new(), 0), (Vec::new(), 0)];
    for (r, row) in x.rows().into_iter().enumerate() {
        if row[loss] != 1.0 {
            continue;
        }
        let z = match row.as_slice() {
            Some(r) => model.log_odds(r),
            None => model.log_odds(&row.to_vec()),
        };
        let g = &mut groups[usize::from(blowout[r])];
        g.0.push(z);
        g.1 += u64::from(y[r]);
    }
    let [(close_z, close_pos), (blow_z, blow_pos)] = &groups;
    let ok = |z: &Vec<f64>, pos: u64| {
        z.len() as u64 >= MIN_SHIFT_ROWS && pos > 0 && pos < z.len() as u64
    };
    if !ok(close_z, *close_pos) || !ok(blow_z, *blow_pos) {
        return Ok(None);
    }
    let close = offset_root(close_z, *close_pos);
    let blow = offset_root(blow_z, *blow_pos);
    Ok(Some(BlowoutShift {
        close,
        blowout: blow - close,
        losses: (close_z.len() + blow_z.len()) as u64,
        blowouts: blow_z.len() as u64,
    }))
}

/// The `a` with `sum sigmoid(z_i + a) = positives` (0 < positives < n): Newton's method on
/// this increasing, concave-convex function, kept inside a bracket that halves when a step
/// leaves it.
fn offset_root(z: &[f64], positives: u64) -> f64 {
    let target = positives as f64;
    let f = |a: f64| -> (f64, f64) {
        z.iter().fold((-target, 0.0), |(v, d), &zi| {
            let p = crate::stats::sigmoid(zi + a);
            (v + p, d + p * (1.0 - p))
        })
    };
    let (mut lo, mut hi) = (-50.0, 50.0);
    let mut a = 0.0;
    for _ in 0..200 {
        let (v, d) = f(a);
        if v.abs() < 1e-10 * target.max(1.0) {
            break;
        }
        if v > 0.0 {
            hi = a;
        } else {
            lo = a;
        }
        let step = a - v / d;
        a = if d > 0.0 && step > lo && step < hi {
            step
        } else {
            0.5 * (lo + hi)
        };
    }
    a
}
