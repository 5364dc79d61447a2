//! L2-penalised logistic regression by Newton's method (argmin's Newton-CG with a More-Thuente
//! line search) on the Hessian of the whole table, computed in parallel over fixed row ranges.
//!
//! Why not linfa-logistic for the churn model: its L-BFGS works on the raw scale of the
//! features, so an ill-conditioned table needs thousands of iterations, and each of its
//! gradients multiplies the whole matrix through a general matrix product that repacks it (the
//! profile of the 1M x 40 benchmark). With at most a few hundred features the Hessian is
//! cheap (one `X^T D X` per iteration, as row blocks through `matrixmultiply`), Newton's method is
//! invariant to the features' scales and converges in a handful of iterations. linfa-logistic
//! stays the reference the tests compare against.
//!
//! The objective is scikit-learn's: `sum_i logloss_i + alpha / 2 |w|^2` with an unpenalised
//! intercept (`alpha = 1 / C`). Sums run over fixed row ranges in a fixed order, so the result
//! does not depend on the number of threads.

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use argmin::core::{CostFunction, Executor, Gradient, Hessian, State, TerminationReason};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::newton::NewtonCG;
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis, Slice};
use rayon::prelude::*;

/// Rows per range: the ranges are fixed (not per thread), so sums are reproducible.
const RANGE_ROWS: usize = 1 << 12;
/// Rows per block inside a range (a block's scaled copy stays in cache).
const BLOCK_ROWS: usize = 512;
/// Columns per product of [`lower_gram`] (the narrower, the more of the left side is packed
/// again). In double precision, 65,536 x 121 rows on one thread: 16 columns 69 ms, 32 64 ms,
/// the whole product 80 ms. In single precision, `mm fit churn` on the main job's 6v6 lake in
/// two alternating rounds: 32 columns 11.7 and 8.8 CPU s, 64 10.2 and 8.7, the whole product
/// 10.7 and 9.5 (the machine slower in the first round).
const GRAM_COLUMNS: usize = 32;

/// How to fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewtonFit {
    /// L2 penalty on the coefficients (not the intercept): `1 / C`.
    pub alpha: f64,
    pub intercept: bool,
    pub max_iterations: u64,
    /// Stop when the objective changes by less than this times the number of rows.
    pub tolerance_per_row: f64,
}

impl Default for NewtonFit {
    fn default() -> Self {
        NewtonFit {
            alpha: 1.0,
            intercept: true,
            max_iterations: 100,
            tolerance_per_row: 1e-12,
        }
    }
}

/// A fitted model and how the fit went.
#[derive(Debug, Clone, PartialEq)]
pub struct NewtonResult {
    pub coef: Array1<f64>,
    pub intercept: f64,
    /// The penalised objective at the solution (summed over rows).
    pub objective: f64,
    /// Euclidean norm of its gradient there in the solver's standardised coordinates (per
    /// standard deviation of each feature: comparable across features of any scale).
    pub gradient_norm: f64,
    pub iterations: u64,
    pub converged: bool,
}

/// The problem on the original scale: parameters are `[w, b]` (or `w` without an intercept).
struct Problem<'a> {
    x: ArrayView2<'a, f64>,
    y: &'a [bool],
    /// The L2 penalty of each coefficient.
    alpha: Array1<f64>,
    intercept: bool,
    /// The last point asked for, with `x w` and the gradient there.
    memo: Mutex<Memo>,
}

/// argmin asks for the cost, the gradient and the Hessian of a point in separate calls (the
/// line search's accepted point's gradient once more at the next Newton step), and each
/// multiplied the whole table by `w` again: three times out of four the same product. The
/// products are the ones computed before, so the fit is the same to the last bit.
#[derive(Default)]
struct Memo {
    theta: Option<Array1<f64>>,
    /// `x w` (without the intercept), a value per row.
    xw: Arc<Vec<f64>>,
    gradient: Option<Array1<f64>>,
}

/// What argmin sees: the same problem in standardised coordinates, `w_k = v_k / s_k` and
/// `b = c - sum_k m_k v_k / s_k` (centring only with an intercept). Newton's method does not
/// care about scale, but its inner conjugate-gradient solve does: on raw features whose scales
/// differ by 10^4 it stalls. The data are never copied; only vectors of length `d` are mapped.
struct Scaled<'a> {
    inner: Problem<'a>,
    mean: Array1<f64>,
    scale: Array1<f64>,
}

impl Scaled<'_> {
    fn d(&self) -> usize {
        self.inner.d()
    }

    /// `theta = A v`.
    fn to_original(&self, v: &Array1<f64>) -> Array1<f64> {
        let d = self.d();
        let mut t = v.clone();
        let mut shift = 0.0;
        for k in 0..d {
            t[k] = v[k] / self.scale[k];
            shift += self.mean[k] * t[k];
        }
        if self.inner.intercept {
            t[d] = v[d] - shift;
        }
        t
    }

    /// `v = A^-1 theta`: a point of the original problem in the scaled coordinates.
    fn to_scaled(&self, theta: &Array1<f64>) -> Array1<f64> {
        let d = self.d();
        let mut v = theta.clone();
        let mut shift = 0.0;
        for k in 0..d {
            v[k] = theta[k] * self.scale[k];
            shift += self.mean[k] * theta[k];
        }
        if self.inner.intercept {
            v[d] = theta[d] + shift;
        }
        v
    }

    /// `A^T g`.
    fn pull_gradient(&self, g: &Array1<f64>) -> Array1<f64> {
        let d = self.d();
        let gb = if self.inner.intercept { g[d] } else { 0.0 };
        let mut out = g.clone();
        for k in 0..d {
            out[k] = (g[k] - self.mean[k] * gb) / self.scale[k];
        }
        out
    }
}

/// `log(1 + e^z)`, stable for large `|z|`.
fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

use crate::stats::sigmoid;

/// `h += s^T s` on and below the diagonal (the upper triangle is left as it was): a product per
/// block of columns, `s[.., j..]^T s[.., j..j + b]`, about two thirds of the whole product's
/// flops. Each entry is the same sum in the same order as in the whole product.
fn lower_gram<T: ndarray::LinalgScalar>(s: ArrayView2<'_, T>, h: &mut Array2<T>) {
    let n = s.ncols();
    for j0 in (0..n).step_by(GRAM_COLUMNS) {
        let j1 = (j0 + GRAM_COLUMNS).min(n);
        let left = s.slice_axis(Axis(1), Slice::from(j0..));
        let right = s.slice_axis(Axis(1), Slice::from(j0..j1));
        let mut rows = h.slice_axis_mut(Axis(0), Slice::from(j0..));
        let mut block = rows.slice_axis_mut(Axis(1), Slice::from(j0..j1));
        ndarray::linalg::general_mat_mul(T::one(), &left.t(), &right, T::one(), &mut block);
    }
}

/// `u_k = (x_k - mean_k) / scale_k * q` in single precision (`inv` holds `1 / scale`).
fn centred_row(u: &mut [f32], x: ArrayView1<'_, f64>, (mean, inv): (&[f64], &[f64]), q: f64) {
    let centred = |((u, &v), (&m, &i)): ((&mut f32, &f64), (&f64, &f64))| {
        *u = ((v - m) * i * q) as f32;
    };
    match x.as_slice() {
        Some(x) => u
            .iter_mut()
            .zip(x)
            .zip(mean.iter().zip(inv))
            .for_each(centred),
        None => u
            .iter_mut()
            .zip(&x)
            .zip(mean.iter().zip(inv))
            .for_each(centred),
    }
}

/// Copies the lower triangle of a square matrix onto the upper one.
fn mirror_lower(h: &mut Array2<f64>) {
    for i in 0..h.nrows() {
        for j in 0..i {
            h[[j, i]] = h[[i, j]];
        }
    }
}

impl<'a> Problem<'a> {
    fn new(x: ArrayView2<'a, f64>, y: &'a [bool], alpha: Array1<f64>, intercept: bool) -> Self {
        Problem {
            x,
            y,
            alpha,
            intercept,
            memo: Mutex::default(),
        }
    }
}

impl Problem<'_> {
    fn d(&self) -> usize {
        self.x.ncols()
    }

    /// `x w` at `theta`, a value per row (the last point's again without a product).
    fn xw(&self, theta: &Array1<f64>) -> Arc<Vec<f64>> {
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.theta.as_ref() == Some(theta) {
            return Arc::clone(&memo.xw);
        }
        let (w, _) = self.split(theta);
        let mut xw = vec![0.0; self.x.nrows()];
        xw.par_chunks_mut(RANGE_ROWS)
            .enumerate()
            .for_each(|(k, out)| {
                let rows = self.x.slice_axis(
                    Axis(0),
                    Slice::from(k * RANGE_ROWS..k * RANGE_ROWS + out.len()),
                );
                for (o, row) in out.iter_mut().zip(rows.rows()) {
                    *o = row.dot(&w);
                }
            });
        *memo = Memo {
            theta: Some(theta.clone()),
            xw: Arc::new(xw),
            gradient: None,
        };
        Arc::clone(&memo.xw)
    }

    fn split<'p>(&self, theta: &'p Array1<f64>) -> (ArrayView1<'p, f64>, f64) {
        let d = self.d();
        let b = if self.intercept { theta[d] } else { 0.0 };
        (theta.slice_axis(Axis(0), Slice::from(..d)), b)
    }

    /// Runs `f` over every fixed row range (its rows of `x`, its labels, and the range) in
    /// parallel and sums the results in range order.
    fn reduce<T: Send>(
        &self,
        f: impl Fn(ArrayView2<'_, f64>, &[bool], Range<usize>) -> T + Sync,
        add: impl Fn(&mut T, T),
    ) -> Option<T> {
        let n = self.x.nrows();
        let parts: Vec<T> = (0..n.div_ceil(RANGE_ROWS))
            .into_par_iter()
            .map(|k| {
                let (a, b) = (k * RANGE_ROWS, ((k + 1) * RANGE_ROWS).min(n));
                f(
                    self.x.slice_axis(Axis(0), Slice::from(a..b)),
                    &self.y[a..b],
                    a..b,
                )
            })
            .collect();
        let mut it = parts.into_iter();
        let mut acc = it.next()?;
        for p in it {
            add(&mut acc, p);
        }
        Some(acc)
    }

    fn cost_of(&self, theta: &Array1<f64>) -> f64 {
        let (w, b) = self.split(theta);
        let xw = self.xw(theta);
        let loss = self
            .reduce(
                |_, y, rows| {
                    xw[rows]
                        .iter()
                        .zip(y)
                        .map(|(&z, &y)| {
                            let z = z + b;
                            softplus(z) - if y { z } else { 0.0 }
                        })
                        .sum::<f64>()
                },
                |a, b| *a += b,
            )
            .unwrap_or(0.0);
        loss + 0.5
            * w.iter()
                .zip(&self.alpha)
                .map(|(w, a)| a * w * w)
                .sum::<f64>()
    }

    fn gradient_of(&self, theta: &Array1<f64>) -> Array1<f64> {
        let xw = self.xw(theta);
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.theta.as_ref() == Some(theta)
            && let Some(g) = &memo.gradient
        {
            return g.clone();
        }
        let g = self.gradient_from(theta, &xw);
        if memo.theta.as_ref() == Some(theta) {
            memo.gradient = Some(g.clone());
        }
        g
    }

    fn gradient_from(&self, theta: &Array1<f64>, xw: &[f64]) -> Array1<f64> {
        let d = self.d();
        let (w, b) = self.split(theta);
        let mut g = self
            .reduce(
                |x, y, rows| {
                    let r: Array1<f64> = xw[rows]
                        .iter()
                        .zip(y)
                        .map(|(&z, &y)| sigmoid(z + b) - f64::from(u8::from(y)))
                        .collect();
                    let mut g = Array1::zeros(d + 1);
                    // X^T r accumulated row by row, in one pass over X: `x.t().dot(&r)` took
                    // a strided dot per column, 120 passes, a fifth of the main job's CPU
                    // (`perf`).
                    let mut gw = g.slice_axis_mut(Axis(0), Slice::from(..d));
                    for (row, &ri) in x.rows().into_iter().zip(&r) {
                        gw.scaled_add(ri, &row);
                    }
                    g[d] = r.sum();
                    g
                },
                |a, b| *a += &b,
            )
            .unwrap_or_else(|| Array1::zeros(d + 1));
        g.slice_axis_mut(Axis(0), Slice::from(..d))
            .zip_mut_with(&(&w * &self.alpha), |g, p| *g += p);
        if !self.intercept {
            g = g.slice_axis(Axis(0), Slice::from(..d)).to_owned();
        }
        g
    }

    /// The Hessian in the solver's coordinates, `A^T H A`: the sum over rows of `q^2 u u^T` with
    /// `u = A^T [x, 1] = [(x - mean) / scale, 1]` and `q^2 = p (1 - p)`, plus the penalty
    /// `alpha_k / scale_k^2` on the diagonal. Centred and scaled rows keep every entry near one,
    /// so each block of rows is multiplied in single precision (`sgemm`, twice the lanes of
    /// `dgemm`) and summed in double. The Hessian only chooses the Newton direction; the cost
    /// and gradient stay in double precision, so the fit stops at the same optimum within its
    /// tolerance: on the main job's lake, the chosen C and coefficients within 1.5e-8 of the
    /// double-precision Hessian's, and the 6v6 `mm fit churn` in 8.6 CPU s against 11.6.
    fn scaled_hessian_of(
        &self,
        theta: &Array1<f64>,
        mean: &Array1<f64>,
        scale: &Array1<f64>,
    ) -> Array2<f64> {
        let d = self.d();
        let np = d + usize::from(self.intercept);
        let (_, b) = self.split(theta);
        let xw = self.xw(theta);
        let mean = mean.to_vec();
        let inv: Vec<f64> = scale.iter().map(|s| 1.0 / s).collect();
        let mut h = self
            .reduce(
                |x, _, rows| {
                    let mut h = Array2::<f64>::zeros((np, np));
                    let mut hb = Array2::<f32>::zeros((np, np));
                    let mut sb = Array2::<f32>::zeros((BLOCK_ROWS, np));
                    let zs = xw[rows].chunks(BLOCK_ROWS);
                    for (xb, z) in x.axis_chunks_iter(Axis(0), BLOCK_ROWS).zip(zs) {
                        let m = xb.nrows();
                        let rows = sb.as_slice_mut().expect("a new array is contiguous");
                        for ((u, xr), &z) in rows.chunks_exact_mut(np).zip(xb.rows()).zip(z) {
                            let p = sigmoid(z + b);
                            let q = (p * (1.0 - p)).sqrt();
                            centred_row(&mut u[..d], xr, (&mean, &inv), q);
                            if self.intercept {
                                u[d] = q as f32;
                            }
                        }
                        hb.fill(0.0);
                        lower_gram(sb.slice_axis(Axis(0), Slice::from(..m)), &mut hb);
                        h.zip_mut_with(&hb, |a, &b| *a += f64::from(b));
                    }
                    h
                },
                |a, b| *a += &b,
            )
            .unwrap_or_else(|| Array2::zeros((np, np)));
        mirror_lower(&mut h);
        for k in 0..d {
            h[[k, k]] += self.alpha[k] * inv[k] * inv[k];
        }
        h
    }
}

impl CostFunction for Scaled<'_> {
    type Param = Array1<f64>;
    type Output = f64;
    fn cost(&self, v: &Self::Param) -> Result<f64, argmin::core::Error> {
        Ok(self.inner.cost_of(&self.to_original(v)))
    }
}

impl Gradient for Scaled<'_> {
    type Param = Array1<f64>;
    type Gradient = Array1<f64>;
    fn gradient(&self, v: &Self::Param) -> Result<Array1<f64>, argmin::core::Error> {
        Ok(self.pull_gradient(&self.inner.gradient_of(&self.to_original(v))))
    }
}

impl Hessian for Scaled<'_> {
    type Param = Array1<f64>;
    type Hessian = Array2<f64>;
    fn hessian(&self, v: &Self::Param) -> Result<Array2<f64>, argmin::core::Error> {
        Ok(self
            .inner
            .scaled_hessian_of(&self.to_original(v), &self.mean, &self.scale))
    }
}

/// Column means and standard deviations (1 for a constant column), over fixed row ranges.
fn moments(p: &Problem<'_>) -> (Array1<f64>, Array1<f64>) {
    let d = p.d();
    let n = p.x.nrows().max(1) as f64;
    let sum = p
        .reduce(|x, _, _| x.sum_axis(Axis(0)), |a, b| *a += &b)
        .unwrap_or_else(|| Array1::zeros(d));
    let mean = sum / n;
    let sq = p
        .reduce(
            |x, _, _| {
                let mut acc = Array1::<f64>::zeros(d);
                for row in x.rows() {
                    acc.zip_mut_with(&row, |a, &v| *a += v * v);
                }
                acc
            },
            |a, b| *a += &b,
        )
        .unwrap_or_else(|| Array1::zeros(d));
    let scale = (sq / n - &mean * &mean).mapv(|v| if v > 1e-24 { v.sqrt() } else { 1.0 });
    (mean, scale)
}

/// Fits `logit P(y) = x w + b` by minimising `sum logloss + alpha / 2 |w|^2`.
///
/// # Errors
/// Mismatched lengths, an empty or one-class `y`, non-finite inputs or a solver failure.
pub fn fit_newton(
    x: ArrayView2<'_, f64>,
    y: &[bool],
    how: &NewtonFit,
) -> Result<NewtonResult, String> {
    fit_newton_weighted(x, y, how, &[])
}

/// As [`fit_newton`] with a penalty `alpha / 2 sum_k weights_k w_k^2` (an empty `weights` is
/// all ones). With `weights_k = sd_k^2` this is the fit on standardised features, without
/// copying them.
///
/// # Errors
/// As [`fit_newton`], and a `weights` of the wrong length or with a negative entry.
pub fn fit_newton_weighted(
    x: ArrayView2<'_, f64>,
    y: &[bool],
    how: &NewtonFit,
    weights: &[f64],
) -> Result<NewtonResult, String> {
    fit_newton_weighted_from(x, y, how, weights, None)
}

/// The inputs of [`fit_newton_weighted_from`] checked: a start of the right length, finite
/// non-negative penalty weights (one a column, or none), a label a row, both classes with an
/// intercept, a finite penalty, finite features. Returns the positive labels.
fn check_inputs(
    x: ArrayView2<'_, f64>,
    y: &[bool],
    how: &NewtonFit,
    weights: &[f64],
    start: Option<(&[f64], f64)>,
) -> Result<usize, String> {
    if let Some((w, _)) = start
        && w.len() != x.ncols()
    {
        return Err(format!(
            "a start of {} coefficients for {} columns",
            w.len(),
            x.ncols()
        ));
    }
    if !weights.is_empty()
        && (weights.len() != x.ncols() || weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)))
    {
        return Err(format!(
            "{} penalty weights for {} columns (finite and >= 0 required)",
            weights.len(),
            x.ncols()
        ));
    }
    if x.nrows() != y.len() {
        return Err(format!("{} rows but {} labels", x.nrows(), y.len()));
    }
    let pos = y.iter().filter(|&&v| v).count();
    if how.intercept && (pos == 0 || pos == y.len()) {
        return Err(format!(
            "{pos} of {} labels are positive: both classes are needed",
            y.len()
        ));
    }
    if !(how.alpha.is_finite() && how.alpha >= 0.0) {
        return Err(format!("penalty {} is not a finite number >= 0", how.alpha));
    }
    if let Some((i, _)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(format!(
            "row {}, column {} is not finite",
            i / x.ncols().max(1),
            i % x.ncols().max(1)
        ));
    }
    Ok(pos)
}

/// [`fit_newton_weighted`] started from `start` (coefficients on the original features and
/// the intercept; say, the optimum of a neighbouring penalty) instead of the base rate. The
/// problem is strictly convex, so the optimum is the same; a start near it takes fewer Newton
/// steps. A start of the wrong length is refused.
///
/// # Errors
/// As [`fit_newton_weighted`].
pub fn fit_newton_weighted_from(
    x: ArrayView2<'_, f64>,
    y: &[bool],
    how: &NewtonFit,
    weights: &[f64],
    start: Option<(&[f64], f64)>,
) -> Result<NewtonResult, String> {
    // A view borrowed here: its lifetime is the one `Problem` needs for both `x` and `y`.
    let x = x.view();
    let pos = check_inputs(x, y, how, weights, start)?;
    let alpha = if weights.is_empty() {
        Array1::from_elem(x.ncols(), how.alpha)
    } else {
        weights.iter().map(|w| w * how.alpha).collect()
    };
    let inner = Problem::new(x, y, alpha, how.intercept);
    let (mut mean, sd) = moments(&inner);
    if !how.intercept {
        mean.fill(0.0);
    }
    // Jacobi scaling of the Hessian at the start: each coordinate's curvature, data and penalty
    // together, near `n p0 (1 - p0)`; a large penalty on a small-scale feature is then not
    // another source of ill-conditioning.
    let rate = pos as f64 / y.len() as f64;
    let q = (rate * (1.0 - rate)).max(1e-6) * y.len() as f64;
    let scale: Array1<f64> = sd
        .iter()
        .zip(&inner.alpha)
        .map(|(s, a)| (s * s + a / q).sqrt())
        .collect();
    let problem = Scaled { inner, mean, scale };
    let np = x.ncols() + usize::from(how.intercept);
    let mut init = Array1::<f64>::zeros(np);
    if let Some((w, b)) = start {
        let mut theta = Array1::<f64>::zeros(np);
        for (t, &v) in theta.iter_mut().zip(w) {
            *t = v;
        }
        if how.intercept {
            theta[np - 1] = b;
        }
        init = problem.to_scaled(&theta);
    } else if how.intercept {
        // Start from the base rate: the first step is then already well scaled.
        init[np - 1] = (rate / (1.0 - rate)).ln();
    }
    let tol = (how.tolerance_per_row * y.len() as f64).max(f64::EPSILON);
    let solver = NewtonCG::new(MoreThuenteLineSearch::new())
        .with_tolerance(tol)
        .map_err(|e| e.to_string())?;
    let res = Executor::new(problem, solver)
        .configure(|s| s.param(init).max_iters(how.max_iterations))
        .ctrlc(false)
        .run()
        .map_err(|e| format!("Newton-CG: {e}"))?;
    let state = res.state();
    let v = state
        .get_best_param()
        .cloned()
        .ok_or("Newton-CG returned no parameters")?;
    let scaled = res
        .problem
        .problem
        .as_ref()
        .ok_or("Newton-CG lost its problem")?;
    let theta = scaled.to_original(&v);
    let converged = matches!(
        state.get_termination_reason(),
        Some(TerminationReason::SolverConverged)
    );
    let iterations = state.get_iter();
    let g = scaled.pull_gradient(&scaled.inner.gradient_of(&theta));
    let objective = scaled.inner.cost_of(&theta);
    let d = x.ncols();
    Ok(NewtonResult {
        coef: theta.slice_axis(Axis(0), Slice::from(..d)).to_owned(),
        intercept: if how.intercept { theta[d] } else { 0.0 },
        objective,
        gradient_norm: g.dot(&g).sqrt(),
        iterations,
        converged,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::logit::{LogitFit, fit_logistic};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Badly scaled features with a known logistic truth.
    fn data(n: usize, seed: u64) -> (Array2<f64>, Vec<bool>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let scales = [1.0, 100.0, 0.01, 5.0];
        let truth = [0.8, -0.006, 40.0, 0.1];
        let mut x = Array2::zeros((n, 4));
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let mut z = -0.5;
            for k in 0..4 {
                let v: f64 = rng.random_range(-1.0..1.0) * scales[k] + 0.3 * scales[k];
                x[[i, k]] = v;
                z += truth[k] * v;
            }
            y.push(rng.random::<f64>() < sigmoid(z));
        }
        (x, y)
    }

    fn objective(x: &Array2<f64>, y: &[bool], w: &Array1<f64>, b: f64, alpha: f64) -> f64 {
        let mut s = 0.0;
        for (row, &yy) in x.rows().into_iter().zip(y) {
            let z = row.dot(w) + b;
            let p = sigmoid(z);
            s -= if yy { p.ln() } else { (1.0 - p).ln() };
        }
        s + 0.5 * alpha * w.dot(w)
    }

    /// Started from a neighbouring penalty's optimum, the fit reaches the cold start's optimum
    /// (the problem is strictly convex) in no more Newton steps; a start of the wrong length is
    /// refused.
    #[test]
    fn a_warm_start_reaches_the_cold_optimum_in_fewer_steps() {
        let (x, y) = data(4000, 11);
        let how = |alpha| NewtonFit {
            alpha,
            tolerance_per_row: 1e-12,
            ..NewtonFit::default()
        };
        let w = [1.0, 4.0, 0.5, 2.0];
        let mut warm_steps = 0;
        let mut cold_steps = 0;
        for (a0, a1) in [(10.0, 1.0), (1.0, 0.1), (100.0, 10.0)] {
            let near = fit_newton_weighted(x.view(), &y, &how(a0), &w).unwrap();
            let cold = fit_newton_weighted(x.view(), &y, &how(a1), &w).unwrap();
            let warm = fit_newton_weighted_from(
                x.view(),
                &y,
                &how(a1),
                &w,
                Some((near.coef.as_slice().unwrap(), near.intercept)),
            )
            .unwrap();
            assert!(cold.converged && warm.converged);
            assert!(
                (warm.objective - cold.objective).abs() <= 1e-9 * cold.objective,
                "{a1}: {} vs {}",
                warm.objective,
                cold.objective
            );
            for k in 0..4 {
                let scale = cold.coef[k].abs().max(1e-3);
                assert!(
                    (warm.coef[k] - cold.coef[k]).abs() < 1e-4 * scale,
                    "{a1} {k}"
                );
            }
            warm_steps += warm.iterations;
            cold_steps += cold.iterations;
        }
        assert!(warm_steps <= cold_steps, "{warm_steps} vs {cold_steps}");
        let short = fit_newton_weighted_from(x.view(), &y, &how(1.0), &w, Some((&[0.0; 3], 0.0)));
        assert!(short.unwrap_err().contains("3 coefficients for 4 columns"));
    }

    /// The same optimum as linfa-logistic run to a tight tolerance, and a gradient near zero.
    #[test]
    fn matches_linfa_on_badly_scaled_features() {
        let (x, y) = data(4000, 7);
        for alpha in [0.0, 1.0, 50.0] {
            let ours = fit_newton(
                x.view(),
                &y,
                &NewtonFit {
                    alpha,
                    ..NewtonFit::default()
                },
            )
            .unwrap();
            assert!(ours.converged, "{ours:?}");
            let (w, b) = fit_logistic(
                &x,
                y.iter().copied().collect(),
                &LogitFit {
                    alpha,
                    intercept: true,
                    max_iterations: 100_000,
                    gradient_tolerance: Some(1e-9),
                },
            )
            .unwrap();
            let ref_obj = objective(&x, &y, &w, b, alpha);
            let our_obj = objective(&x, &y, &ours.coef, ours.intercept, alpha);
            assert!((ours.objective - our_obj).abs() < 1e-8 * our_obj, "{alpha}");
            assert!(
                our_obj <= ref_obj + 1e-7 * ref_obj,
                "{alpha}: {our_obj} vs linfa {ref_obj}"
            );
            // A mean gradient per row under 1e-6 standard deviations.
            assert!(
                ours.gradient_norm < 1e-6 * y.len() as f64,
                "{alpha}: {ours:?}"
            );
            for k in 0..4 {
                let tol = 1e-3 * w[k].abs().max(1e-3);
                assert!(
                    (ours.coef[k] - w[k]).abs() < tol,
                    "{alpha} {k}: {} vs {}",
                    ours.coef[k],
                    w[k]
                );
            }
        }
    }

    /// Features far from zero against their spread (a timestamp, a rating near 1500) make the
    /// same problem as centred ones, the intercept taking the shift. The Hessian is summed in
    /// single precision from centred rows, so the shifted fit reaches the same coefficients in
    /// as many Newton steps (uncentred, its entries would lose every digit of the spread).
    #[test]
    fn shifted_features_fit_as_the_centred_ones() {
        let (x, y) = data(4000, 11);
        let shift = Array1::from(vec![1e3, 1e6, 50.0, 0.0]);
        let shifted = &x + &shift;
        for alpha in [0.0, 1.0, 50.0] {
            let how = NewtonFit {
                alpha,
                ..NewtonFit::default()
            };
            let centred = fit_newton(x.view(), &y, &how).unwrap();
            let far = fit_newton(shifted.view(), &y, &how).unwrap();
            assert!(centred.converged && far.converged, "{centred:?} {far:?}");
            assert!(
                far.iterations <= centred.iterations + 1,
                "{alpha}: {} Newton steps against {}",
                far.iterations,
                centred.iterations
            );
            for k in 0..4 {
                let (a, b) = (centred.coef[k], far.coef[k]);
                assert!(
                    (a - b).abs() < 1e-6 * a.abs().max(1e-3),
                    "{alpha} {k}: {a} vs {b}"
                );
            }
            let b = far.intercept + far.coef.dot(&shift);
            assert!(
                (b - centred.intercept).abs() < 1e-6 * (1.0 + centred.intercept.abs()),
                "{alpha}: intercept {b} vs {}",
                centred.intercept
            );
        }
    }

    /// A penalty weighted by each column's variance is the plain penalty on standardised columns.
    #[test]
    fn weighted_penalty_is_standardisation() {
        let (x, y) = data(3000, 11);
        let n = x.nrows() as f64;
        let mean = x.sum_axis(Axis(0)) / n;
        let sd = x.map_axis(Axis(0), |c| {
            let m = c.sum() / n;
            (c.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt()
        });
        let z = (&x - &mean) / &sd;
        let how = NewtonFit {
            alpha: 20.0,
            ..NewtonFit::default()
        };
        let plain = fit_newton(z.view(), &y, &how).unwrap();
        let weights: Vec<f64> = sd.iter().map(|s| s * s).collect();
        let raw = fit_newton_weighted(x.view(), &y, &how, &weights).unwrap();
        for k in 0..4 {
            let std_coef = raw.coef[k] * sd[k];
            assert!(
                (std_coef - plain.coef[k]).abs() < 1e-6,
                "{k}: {std_coef} vs {}",
                plain.coef[k]
            );
        }
        let b = raw.intercept + raw.coef.dot(&mean);
        assert!((b - plain.intercept).abs() < 1e-6);
        assert!(fit_newton_weighted(x.view(), &y, &how, &[1.0]).is_err());
    }

    /// Row ranges are fixed, so a fit over more rows than one range is the same on any pool.
    #[test]
    fn deterministic_across_thread_counts() {
        let (x, y) = data(3 * RANGE_ROWS + 17, 3);
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| fit_newton(x.view(), &y, &NewtonFit::default()).unwrap())
        };
        let (a, b) = (run(1), run(2));
        assert_eq!(a.coef, b.coef);
        assert_eq!(a.intercept.to_bits(), b.intercept.to_bits());
    }

    #[test]
    fn refuses_bad_input() {
        let (mut x, y) = data(10, 1);
        assert!(fit_newton(x.view(), &y[..5], &NewtonFit::default()).is_err());
        assert!(fit_newton(x.view(), &[true; 10], &NewtonFit::default()).is_err());
        x[[3, 2]] = f64::NAN;
        let e = fit_newton(x.view(), &y, &NewtonFit::default()).unwrap_err();
        assert!(e.contains("row 3, column 2"), "{e}");
    }
}
