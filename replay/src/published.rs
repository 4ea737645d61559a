//! Published figures against the rerun: every figure `workloads.<w>.published` of
//! `pipeline.yaml` gives, next to the value replay.json holds, its delta and whether it is
//! within tolerance (the one check the run summary, run.json and the report show).

use crate::output::ReplayDocument;
use model::PipelineConfig;
use schedule::ResourceHours;
use serde::Serialize;

/// One published figure checked against the rerun.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureCheck {
    /// Workload.
    pub workload: String,
    /// Resource (`cpu`, `ram`, `gpu`, `cache`).
    pub resource: String,
    /// Figure (`fifo_ideal_h`, `best_found_h`, `best_bounds_h`).
    pub figure: String,
    /// The published figure as written (`71.56 (rtol 0.001)`, `at most 63`).
    pub published: String,
    /// The rerun's value (null when the rerun has no such workload).
    pub rerun: Option<f64>,
    /// The rerun minus the published value (or the limit); null without a rerun value.
    pub delta: Option<f64>,
    /// The rerun's delta relative to the published value (or the limit); null when that is
    /// 0 or there is no rerun value.
    pub relative_delta: Option<f64>,
    /// Within tolerance.
    pub ok: bool,
}

impl FigureCheck {
    /// `tmax gpu best_found_h`.
    pub fn name(&self) -> String {
        format!("{} {} {}", self.workload, self.resource, self.figure)
    }

    /// The rerun, the delta and the relative delta as the tables show them (`-` when
    /// absent): `58.4085`, `-0.0015`, `-0.003%`.
    pub fn value_cells(&self) -> [String; 3] {
        [
            self.rerun.map_or("-".into(), |x| format!("{x:.4}")),
            self.delta.map_or("-".into(), |d| format!("{d:+.4}")),
            self.relative_delta
                .map_or("-".into(), |d| format!("{:+.3}%", d * 100.0)),
        ]
    }
}

/// Every published figure of `cfg`, checked against `doc`, in workload, resource and figure
/// order.
pub fn check(cfg: &PipelineConfig, doc: &ReplayDocument) -> Vec<FigureCheck> {
    let mut out = Vec::new();
    for (w, wc) in cfg.workloads.iter() {
        let rerun = doc.workloads.iter().find(|d| d.workload == w);
        for (resource, figure, published) in wc.published.figures() {
            let hours = |h: &ResourceHours| match resource {
                "cpu" => h.cpu,
                "ram" => h.ram,
                "gpu" => h.gpu,
                _ => h.cache,
            };
            let value = rerun.map(|d| match figure {
                "fifo_ideal_h" => hours(&d.fifo_ideal_h),
                "best_found_h" => hours(&d.best_found_h),
                _ => hours(&d.best_bounds_h),
            });
            let reference = published.value.or(published.max).or(published.min);
            let delta = value.map(|x| published.delta(x));
            out.push(FigureCheck {
                workload: w.to_string(),
                resource: resource.into(),
                figure: figure.into(),
                published: published.describe(),
                rerun: value,
                delta,
                relative_delta: match (delta, reference) {
                    (Some(d), Some(r)) if r != 0.0 => Some(d / r.abs()),
                    _ => None,
                },
                ok: value.is_some_and(|x| published.accepts(x)),
            });
        }
    }
    out
}

/// Every published figure of `cfg` checked against the replay.json of its run directory
/// (none given: none checked, and replay.json is not read).
pub fn check_run(cfg: &model::LoadedConfig) -> Result<Vec<FigureCheck>, crate::ReplayError> {
    if cfg
        .config
        .workloads
        .iter()
        .all(|(_, w)| w.published.is_empty())
    {
        return Ok(Vec::new());
    }
    let path = model::run_dir::RunDir::new(&cfg.run_dir).file(crate::output::REPLAY_JSON_FILE);
    Ok(check(&cfg.config, &crate::output::read_replay_json(&path)?))
}

/// The checks as a Markdown table (figure, published, rerun, delta, relative delta, ok).
pub fn markdown_table(checks: &[FigureCheck]) -> String {
    let mut s = String::from(
        "| figure | published | rerun | delta | relative | ok |\n|---|---|---|---|---|---|\n",
    );
    for c in checks {
        let [rerun, delta, relative] = c.value_cells();
        s.push_str(&format!(
            "| {} | {} | {rerun} | {delta} | {relative} | {} |\n",
            c.name(),
            c.published,
            if c.ok { "yes" } else { "**no**" }
        ));
    }
    s
}
