//! `mm bench logistic`: our churn solver (Newton-CG, `mm_trainer::logit::newton`) on the peers'
//! synthetic churn table (`bench_lr.py`, 80% train / 20% test, raw features, C = 1), beside
//! scikit-learn's lbfgs with `max_iter=200` run on the same files in the same run, and checked
//! against the converged objective the peers recorded (`results/lr_N{N}.json`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use mm_trainer::logit::newton::{NewtonFit, fit_newton};
use mm_trainer::logit::{LogitFit, fit_logistic};
use mm_trainer::stats::{auc, sigmoid};
use serde::Serialize;

use crate::args::BenchLogisticArgs;
use crate::table::{Table, read_table};
use crate::{median, peer_python};

/// Times scikit-learn's fit the way `bench_lr.py` does, on the files we read.
const PEER_SCRIPT: &str = include_str!("../peers/logistic_sklearn.py");

#[derive(Debug, Serialize)]
struct Fit {
    solver: String,
    seconds: f64,
    runs_s: Vec<f64>,
    iterations: u64,
    objective: f64,
    /// Objective minus the peers' converged reference, relative.
    gap_to_converged: Option<f64>,
    test_auc: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    rows_train: usize,
    rows_test: usize,
    features: usize,
    read_seconds: f64,
    reference_objective: Option<f64>,
    ours: Fit,
    linfa: Option<Fit>,
    sklearn_200: Option<Fit>,
    /// scikit-learn's 200-iteration fit time over ours, measured in this run.
    speedup_vs_sklearn: Option<f64>,
}

fn files(a: &BenchLogisticArgs) -> (PathBuf, PathBuf) {
    let n = a.rows;
    (
        a.data.join(format!("lr_N{n}_train.parquet")),
        a.data.join(format!("lr_N{n}_test.parquet")),
    )
}

/// The converged objective the peers recorded for this size, if any.
fn reference(peers: &Path, n: usize) -> Option<f64> {
    let p = peers.join(format!("results/lr_N{n}.json"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
    v["reference_converged"]["penalized_objective_sum"].as_f64()
}

fn test_auc(x: &ndarray::Array2<f64>, y: &[bool], w: &[f64], b: f64) -> f64 {
    let p: Vec<f64> = x
        .rows()
        .into_iter()
        .map(|r| sigmoid(b + r.iter().zip(w).map(|(a, c)| a * c).sum::<f64>()))
        .collect();
    auc(&p, y)
}

pub fn logistic(a: &BenchLogisticArgs, json: bool) -> Result<()> {
    let (train, test) = files(a);
    let python = if a.no_peer {
        None
    } else {
        peer_python(a.peer_python.as_deref(), "sklearn")
    };
    if !train.exists() || !test.exists() {
        generate(a, python.as_deref(), &train)?;
    }
    let t0 = Instant::now();
    let tr = read_table(&train, "churned")?;
    let te = read_table(&test, "churned")?;
    let read_seconds = t0.elapsed().as_secs_f64();
    if tr.names != te.names {
        bail!("train and test columns differ");
    }
    let reference_objective = reference(&a.peers, a.rows);
    let gap = |obj: f64| reference_objective.map(|r| (obj - r) / r);

    let ours = ours(a, &tr, &te, &gap)?;
    let linfa = if a.linfa {
        Some(linfa(a, &tr, &te, &gap)?)
    } else {
        None
    };
    let sklearn_200 = match &python {
        Some(py) => Some(sklearn(a, py, &train, &test, &gap)?),
        None => {
            eprintln!("scikit-learn not found: the peer is skipped (`task peers:setup`)");
            None
        }
    };
    let report = Report {
        rows_train: tr.y.len(),
        rows_test: te.y.len(),
        features: tr.names.len(),
        read_seconds,
        reference_objective,
        speedup_vs_sklearn: sklearn_200.as_ref().map(|s| s.seconds / ours.seconds),
        ours,
        linfa,
        sklearn_200,
    };
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// Writes the train and test tables with the peers' `bench_lr.py`.
fn generate(a: &BenchLogisticArgs, python: Option<&Path>, train: &Path) -> Result<()> {
    let Some(py) = python else {
        bail!(
            "{} is missing: generate it with `python {}/bench_lr.py --sizes {} --gen-only --data {}` (the peers' venv: `task peers:setup`)",
            train.display(),
            a.peers.display(),
            a.rows,
            a.data.display()
        );
    };
    eprintln!("generating the {}-row table with bench_lr.py", a.rows);
    let st = Command::new(py)
        .arg(a.peers.join("bench_lr.py"))
        .args(["--sizes", &a.rows.to_string(), "--gen-only", "--data"])
        .arg(&a.data)
        .status()?;
    if !st.success() {
        bail!("bench_lr.py --gen-only failed");
    }
    Ok(())
}

/// Our Newton fit, `a.reps` times: the median time and the last run's figures.
fn ours(
    a: &BenchLogisticArgs,
    tr: &Table,
    te: &Table,
    gap: &dyn Fn(f64) -> Option<f64>,
) -> Result<Fit> {
    let how = NewtonFit {
        alpha: 1.0,
        ..NewtonFit::default()
    };
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..a.reps.max(1) {
        let t = Instant::now();
        let r = fit_newton(tr.x.view(), &tr.y, &how).map_err(anyhow::Error::msg)?;
        runs.push(t.elapsed().as_secs_f64());
        last = Some(r);
    }
    let r = last.context("no run")?;
    Ok(Fit {
        solver: "mm Newton-CG (argmin), exact Hessian".into(),
        seconds: median(&mut runs.clone()),
        runs_s: runs,
        iterations: r.iterations,
        objective: r.objective,
        gap_to_converged: gap(r.objective),
        test_auc: test_auc(&te.x, &te.y, r.coef.as_slice().unwrap_or(&[]), r.intercept),
    })
}

/// linfa-logistic's L-BFGS fit with `a.linfa_iterations` iterations at most.
fn linfa(
    a: &BenchLogisticArgs,
    tr: &Table,
    te: &Table,
    gap: &dyn Fn(f64) -> Option<f64>,
) -> Result<Fit> {
    let t = Instant::now();
    let (w, b) = fit_logistic(
        &tr.x,
        tr.y.iter().copied().collect(),
        &LogitFit {
            alpha: 1.0,
            intercept: true,
            max_iterations: a.linfa_iterations,
            gradient_tolerance: Some(1e-4 * tr.y.len() as f64),
        },
    )
    .map_err(anyhow::Error::msg)?;
    let secs = t.elapsed().as_secs_f64();
    let obj = objective(&tr.x, &tr.y, w.as_slice().unwrap_or(&[]), b);
    Ok(Fit {
        solver: format!(
            "linfa-logistic L-BFGS (max {} iterations)",
            a.linfa_iterations
        ),
        seconds: secs,
        runs_s: vec![secs],
        iterations: a.linfa_iterations,
        objective: obj,
        gap_to_converged: gap(obj),
        test_auc: test_auc(&te.x, &te.y, w.as_slice().unwrap_or(&[]), b),
    })
}

/// scikit-learn's lbfgs fit (200 iterations at most) in the peers' Python, `a.peer_reps` times.
fn sklearn(
    a: &BenchLogisticArgs,
    py: &Path,
    train: &Path,
    test: &Path,
    gap: &dyn Fn(f64) -> Option<f64>,
) -> Result<Fit> {
    let o = Command::new(py)
        .args(["-c", PEER_SCRIPT])
        .arg(&a.peers)
        .arg(train)
        .arg(test)
        .arg(a.peer_reps.max(1).to_string())
        .output()?;
    if !o.status.success() {
        bail!(
            "scikit-learn peer failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)?;
    let mut fits: Vec<f64> = v["fit_s"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    let obj = v["objective"].as_f64().unwrap_or(f64::NAN);
    Ok(Fit {
        solver: "scikit-learn lbfgs, max_iter=200".into(),
        seconds: median(&mut fits.clone()),
        runs_s: std::mem::take(&mut fits),
        iterations: v["n_iter"].as_u64().unwrap_or(0),
        objective: obj,
        gap_to_converged: gap(obj),
        test_auc: v["test_auc"].as_f64().unwrap_or(f64::NAN),
    })
}

/// `mm bench logistic`'s figures, as text.
fn print_report(report: &Report) {
    mm_run::outln!(
        "logistic regression, {} train x {} features (read {:.2} s); converged reference objective {}",
        report.rows_train,
        report.features,
        report.read_seconds,
        report
            .reference_objective
            .map_or("-".into(), |r| format!("{r:.4}"))
    );
    mm_run::outln!(
        "{:<48} {:>9} {:>6} {:>16} {:>12} {:>9}",
        "solver",
        "fit s",
        "iters",
        "objective",
        "rel. gap",
        "test AUC"
    );
    for f in [
        Some(&report.ours),
        report.linfa.as_ref(),
        report.sklearn_200.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        mm_run::outln!(
            "{:<48} {:>9.3} {:>6} {:>16.4} {:>12} {:>9.5}",
            f.solver,
            f.seconds,
            f.iterations,
            f.objective,
            f.gap_to_converged
                .map_or("-".into(), |g| format!("{g:+.2e}")),
            f.test_auc
        );
    }
    if let Some(s) = report.speedup_vs_sklearn {
        mm_run::outln!("ours is {s:.1}x faster than scikit-learn's 200-iteration fit (same run)");
    }
}

/// `sum logloss + |w|^2 / 2` (C = 1), as the peers compute it.
fn objective(x: &ndarray::Array2<f64>, y: &[bool], w: &[f64], b: f64) -> f64 {
    let mut s = 0.0;
    for (r, &yy) in x.rows().into_iter().zip(y) {
        let p = sigmoid(b + r.iter().zip(w).map(|(a, c)| a * c).sum::<f64>());
        s -= if yy { p.ln() } else { (1.0 - p).ln() };
    }
    s + 0.5 * w.iter().map(|v| v * v).sum::<f64>()
}
