//! A search's report (`capacity.json`, the table): the points by intensity, why the failing
//! ones failed, the fitted pass-probability curve and the answer.

use super::*;

/// Why the runs at an intensity failed, by check, with in how many runs.
fn limits(points: &[&SearchPoint], slos: &[Slo], o: &PointOptions) -> Vec<String> {
    let n = points.len();
    let mut out = Vec::new();
    let mut count = |what: String, f: &dyn Fn(&PointEval) -> bool| {
        let k = points.iter().filter(|p| f(&p.eval)).count();
        if k > 0 {
            out.push(format!("{what} ({k} of {n} runs)"));
        }
    };
    for (i, s) in slos.iter().enumerate() {
        count(s.spec.clone(), &|e| e.slos.get(i).is_some_and(|v| !v.met));
    }
    count("throughput fell behind the offered rate".into(), &|e| {
        e.throughput.iter().any(|t| !t.kept_up)
    });
    // The evidence: the backlog's growth against its counting noise (in each run that was not
    // stationary, the op type, or `all`, whose growth was furthest beyond its noise), and the
    // run verdicts.
    let mut ops: Vec<&str> = Vec::new();
    let growth: Vec<(i64, f64)> = points
        .iter()
        .filter(|p| !p.eval.stationary)
        .filter_map(|p| {
            p.eval
                .throughput
                .iter()
                .filter(|t| t.backlog_sigma > 0.0)
                .max_by(|a, b| {
                    (a.backlog_growth as f64 / a.backlog_sigma)
                        .total_cmp(&(b.backlog_growth as f64 / b.backlog_sigma))
                })
        })
        .map(|t| {
            if !ops.contains(&t.op.as_str()) {
                ops.push(&t.op);
            }
            (t.backlog_growth, t.backlog_sigma)
        })
        .collect();
    let stationary = if growth.is_empty() {
        "not stationary".to_owned()
    } else {
        format!(
            "not stationary: the backlog ({}) grew by {}–{} events (counting noise σ ≈ {:.0})",
            ops.join(", "),
            growth.iter().map(|g| g.0).min().unwrap_or(0),
            growth.iter().map(|g| g.0).max().unwrap_or(0),
            growth.iter().map(|g| g.1).sum::<f64>() / growth.len() as f64
        )
    };
    count(stationary, &|e| !e.stationary);
    // The run's own verdict: the engine (the tool, not the system) named as such, with the
    // first such run's evidence.
    // Under --allow-invalid such a run was judged by its SLOs anyway: said so, since the
    // engine then did not decide the point.
    for verdict in ["engine-bound", "partly-valid", "incomplete", "failed"] {
        let evidence = points
            .iter()
            .filter(|p| p.eval.validity == verdict)
            .find_map(|p| p.eval.validity_evidence.clone());
        let judged = if o.allow_invalid {
            "; judged by its SLOs anyway (--allow-invalid)"
        } else {
            ""
        };
        let what = match (verdict, evidence) {
            ("engine-bound", Some(e)) => format!("the engine, not the system ({e}{judged})"),
            ("engine-bound", None) => format!("the engine, not the system{judged}"),
            ("partly-valid", Some(e)) => {
                format!("the engine, for some op types, not the system ({e}{judged})")
            }
            (_, _) => format!("run {verdict}{judged}"),
        };
        count(what, &|e| e.validity == verdict);
    }
    // The cluster's own queues (with --apiserver-metrics / --csi-metrics): each subject
    // (the API server, the sidecars' work queues, their client limiters) with the first
    // point's evidence.
    let mut subjects: Vec<(&str, String)> = Vec::new();
    for p in points {
        for e in &p.eval.control_plane {
            let subject = e.split(':').next().unwrap_or_default();
            if !subjects.iter().any(|(s, _)| *s == subject) {
                subjects.push((subject, e.clone()));
            }
        }
    }
    for (subject, first) in subjects {
        count(format!("the control plane, {first}"), &|e| {
            e.control_plane
                .iter()
                .any(|x| x.split(':').next() == Some(subject))
        });
    }
    count("failed operations".into(), &|e| {
        e.total()
            .is_some_and(|t| t.failed as f64 > o.max_error_rate * t.count as f64)
    });
    out
}

pub(super) fn report(
    a: &CapacityArgs,
    input: &Input,
    slos: &[Slo],
    o: &PointOptions,
    search: &Search,
    points: &[SearchPoint],
    stopped: Option<String>,
) -> CapacitySearchReport {
    let (lo, hi) = search.bracket();
    let at = |x: Option<f64>| -> Vec<&SearchPoint> {
        points.iter().filter(|p| Some(p.intensity) == x).collect()
    };
    let (lo_runs, hi_runs) = (at(lo), at(hi));
    let mut rates = Vec::new();
    if let Some(first) = lo_runs.first() {
        for t in &first.eval.throughput {
            if t.op != "all" && t.count < o.min_events {
                continue;
            }
            let of = |runs: &[&SearchPoint]| -> Vec<(f64, f64)> {
                runs.iter()
                    .filter_map(|p| p.eval.throughput.iter().find(|x| x.op == t.op))
                    .map(|x| (x.offered_rate, x.achieved_rate))
                    .collect()
            };
            let l = of(&lo_runs);
            let h = of(&hi_runs);
            let mean = |v: &[(f64, f64)]| v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64;
            rates.push(OpRate {
                op: t.op.clone(),
                sustained: mean(&l),
                failed: (!h.is_empty()).then(|| mean(&h)),
                achieved_range: (
                    l.iter().map(|x| x.1).fold(f64::INFINITY, f64::min),
                    l.iter().map(|x| x.1).fold(0.0, f64::max),
                ),
                at_probability: None,
                interval: None,
            });
        }
    }
    let fit: Vec<(f64, bool)> = points
        .iter()
        .filter_map(|p| p.eval.total().map(|t| (t.offered_rate, p.eval.pass)))
        .filter(|r| r.0 > 0.0)
        .collect();
    let slope = analyze::capacity::fit_slope(points.iter().map(|p| &p.eval));
    let estimate = analyze::passprob::estimate(&fit, a.pass_probability, slope);
    let half = analyze::passprob::estimate(&fit, 0.5, slope);
    let capacity_interval = estimate
        .as_ref()
        .map(|e| (e.low, half.as_ref().and_then(|h| h.high)));
    let min_events_near = estimate.as_ref().and_then(|e| {
        points
            .iter()
            .filter_map(|p| p.eval.total())
            .filter(|t| (t.offered_rate / e.rate - 1.0).abs() <= 0.05)
            .map(|t| t.count)
            .min()
    });
    // Each op type's share of all events is the same at every intensity: scale the answer.
    for r in &mut rates {
        let share = lo_runs
            .first()
            .and_then(|p| {
                let all = p.eval.total()?.offered_rate;
                let op = p
                    .eval
                    .throughput
                    .iter()
                    .find(|t| t.op == r.op)?
                    .offered_rate;
                (all > 0.0).then_some(op / all)
            })
            .unwrap_or(1.0);
        r.at_probability = estimate.as_ref().map(|e| e.rate * share);
        r.interval = capacity_interval.map(|(l, h)| (l.map(|x| x * share), h.map(|x| x * share)));
    }
    let limited_by = limits(&hi_runs, slos, o);
    let resolution = lo.zip(hi).map(|(l, h)| h / l - 1.0);
    let complete = stopped.is_none();
    let (kind, intensity) = match input {
        Input::Trace => ("trace", "speed".to_owned()),
        Input::Model(_, t) => (
            "model",
            format!(
                "{} target rate (/s)",
                serde_json::to_value(t.op)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
        ),
    };
    let slo_text = if slos.is_empty() {
        "throughput only".to_owned()
    } else {
        slos.iter()
            .map(|s| s.spec.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let per_op: Vec<String> = rates
        .iter()
        .filter(|r| r.op != "all")
        .map(|r| match r.failed {
            Some(f) => format!("{} {:.2}–{:.2}/s", r.op, r.sustained, f),
            None => format!("{} ≥ {:.2}/s", r.op, r.sustained),
        })
        .collect();
    let fmt_opt = |x: Option<f64>| x.map_or("unbounded".to_owned(), |x| format!("{x:.2}"));
    let fitted: Vec<String> = rates
        .iter()
        .filter(|r| r.op != "all")
        .filter_map(|r| {
            let (l, h) = r.interval?;
            Some(format!(
                "{} {:.2}/s (95 % interval [{}, {}]/s)",
                r.op,
                r.at_probability?,
                fmt_opt(l),
                fmt_opt(h)
            ))
        })
        .collect();
    let mut answer = answer::sentence(&answer::Parts {
        slo_text: &slo_text,
        pass_probability: a.pass_probability,
        fitted: &fitted,
        fit_runs: fit.len(),
        per_op: &per_op,
        lo,
        hi,
        lo_passed: (
            lo_runs.iter().filter(|p| p.eval.pass).count(),
            lo_runs.len(),
        ),
        resolution,
    });
    if !limited_by.is_empty() {
        answer.push_str(&format!("; limited by: {}", limited_by.join(", ")));
    }
    if let Some(s) = &stopped {
        answer.push_str(&format!(" (search stopped early: {s})"));
    }
    answer.push('.');
    CapacitySearchReport {
        input: a.input.display().to_string(),
        input_kind: kind.to_owned(),
        intensity,
        provider: format!("{:?}", a.provider).to_lowercase(),
        slos: slos.to_vec(),
        settings: SearchSettings {
            start: search_start(a, input),
            factor: a.factor,
            resolution: a.resolution,
            repeats: a.repeats,
            tolerance: o.tolerance,
            max_error_rate: o.max_error_rate,
            refine: a.refine,
            pass_probability: a.pass_probability,
        },
        points: points.to_vec(),
        sustained_intensity: lo,
        failed_intensity: hi,
        resolution,
        rates,
        estimate,
        half,
        capacity_interval,
        fit_runs: fit.len(),
        min_events_near,
        limited_by,
        complete,
        stopped,
        answer,
    }
}
