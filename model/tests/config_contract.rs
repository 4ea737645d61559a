//! The pipeline.yaml / manifest contract: every refusal names the file, line and field.

use model::config::{
    EFFORT_QUICK, EFFORT_THOROUGH, LocationKind, SearchBudget, SearchEffort, SearchProfile,
    load_config, load_config_str,
};
use model::{ConfigError, WorkloadId};
use std::path::Path;

const MANIFEST: &str = "archive_id,workload,sha256,bytes,gcs_bucket,gcs_object,gcs_generation,hf_repo,hf_revision,hf_shard,hf_member,file_path
tmax-000,tmax,d38f9994b27ea8f706fa8dec55d2859100c348c50fc6cf9056458665a24ead50,324649,traces,tmax/tmax-000.tar.gz,1700000000000001,,,,,archives/tmax-000.tar.gz
deepswe-000,deepswe,4d69ceab7e96a398b2133db6b40c4009137964e8545d0726af7279f01b5cfe24,714540,,,,org/traces,0123456789abcdef0123456789abcdef01234567,raw/shard-00000.tar,deepswe-000.tar.zst,
";

const GOOD: &str = "version: 1
run_dir: runs/demo
sources:
  manifest: manifest.csv
  locations: [file, gcs, hf]
  gcs: { endpoint: null }
  hf: { endpoint: null }
workloads:
  tmax:
    expect: { audited: 267, included: 253 }
    replay: { concurrency: 16, cpu_cores: 27, ram_gib: 66, gpus: 8 }
  deepswe:
    expect: { audited: 2000, included: 1998, pilot: 100 }
    replay: { concurrency: 32, cpu_cores: 64, ram_gib: 256, gpus: 8 }
search:
  seed: 20261129
  order: [tmax, deepswe]
";

fn with_files(
    yaml: &str,
    manifest: &str,
) -> (tempfile::TempDir, Result<model::LoadedConfig, ConfigError>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), yaml).unwrap();
    std::fs::write(dir.path().join("manifest.csv"), manifest).unwrap();
    let r = load_config(&dir.path().join("pipeline.yaml"));
    (dir, r)
}

fn err(yaml: &str) -> String {
    let (_d, r) = with_files(yaml, MANIFEST);
    let e = r.expect_err("must be refused").to_string();
    // Paths differ per temp dir: keep the part after the file name.
    e.split_once("pipeline.yaml")
        .map(|(_, t)| format!("pipeline.yaml{t}"))
        .unwrap_or(e)
}

fn merr(manifest: &str) -> String {
    let (_d, r) = with_files(GOOD, manifest);
    let e = r.expect_err("must be refused").to_string();
    e.split_once("manifest.csv")
        .map(|(_, t)| format!("manifest.csv{t}"))
        .unwrap_or(e)
}

#[test]
fn good_config_loads_with_archives_and_defaults() {
    let (dir, r) = with_files(GOOD, MANIFEST);
    let c = r.unwrap();
    assert_eq!(c.archives.len(), 2);
    assert_eq!(c.run_dir, dir.path().join("runs/demo"));
    assert_eq!(
        c.config.sources.locations,
        vec![LocationKind::File, LocationKind::Gcs, LocationKind::Hf]
    );
    let a = &c.archives[0];
    assert_eq!(a.gcs.as_ref().unwrap().generation, 1_700_000_000_000_001);
    assert_eq!(
        a.gcs.as_ref().unwrap().uri(),
        "gs://traces/tmax/tmax-000.tar.gz#1700000000000001"
    );
    assert_eq!(
        a.file.as_ref().unwrap().path,
        dir.path().join("archives/tmax-000.tar.gz")
    );
    assert!(c.archives[1].file.is_none());
    assert_eq!(
        c.archives[1].hf.as_ref().unwrap().member,
        "deepswe-000.tar.zst"
    );
    assert_eq!(c.layout(WorkloadId::Tmax).unwrap().identity, "trial.json");
    assert_eq!(
        c.layout(WorkloadId::Deepswe).unwrap().request_start,
        "requests/{seq}.start"
    );
    assert_eq!(c.config.ingest.parallel, 4);
    assert_eq!(c.sha256.len(), 64);
}

#[test]
fn search_profile_defaults_to_extended_and_takes_seed() {
    let (_d, r) = with_files(GOOD, MANIFEST);
    assert_eq!(r.unwrap().config.search.profile, SearchProfile::Extended);
    let y = GOOD.replace(
        "  order: [tmax, deepswe]\n",
        "  order: [tmax, deepswe]\n  profile: seed\n",
    );
    let (_d, r) = with_files(&y, MANIFEST);
    assert_eq!(r.unwrap().config.search.profile, SearchProfile::Seed);
    let y = GOOD.replace(
        "  order: [tmax, deepswe]\n",
        "  order: [tmax, deepswe]\n  profile: fast\n",
    );
    assert!(
        err(&y).starts_with("pipeline.yaml:18: field `search.profile`: unknown variant `fast`"),
        "{}",
        err(&y)
    );
}

#[test]
fn search_effort_scales_the_repetition_counts_and_explicit_keys_win() {
    let search = |extra: &str| {
        let y = GOOD.replace(
            "  order: [tmax, deepswe]\n",
            &format!("  order: [tmax, deepswe]\n{extra}"),
        );
        let (_d, r) = with_files(&y, MANIFEST);
        r.unwrap().config.search
    };
    let d = SearchBudget::default();
    let plain = search("");
    assert_eq!(plain.effort, SearchEffort::Default);
    assert_eq!(plain.budget_counts(), d);
    assert_eq!(search("  effort: default\n").budget_counts(), d);

    let thorough = search("  effort: thorough\n");
    assert_eq!(thorough.effort, SearchEffort::Thorough);
    let t = thorough.budget_counts();
    let scaled = |v: u32, f: f64| (f64::from(v) * f).round() as u32;
    assert_eq!(t.lns_rounds, scaled(d.lns_rounds, EFFORT_THOROUGH));
    assert_eq!(t.random_orders, scaled(d.random_orders, EFFORT_THOROUGH));
    assert_eq!(
        t.blob_group_orders,
        scaled(d.blob_group_orders, EFFORT_THOROUGH)
    );
    // Step sizes and shapes are kept.
    assert_eq!(t.lns_moves, d.lns_moves);
    assert_eq!(t.local_move_batch, d.local_move_batch);
    assert_eq!(t.perturbation_spread, d.perturbation_spread);

    let q = search("  effort: quick\n").budget_counts();
    assert_eq!(q.adaptive_batches, scaled(d.adaptive_batches, EFFORT_QUICK));
    assert_eq!(q.lns_rounds, scaled(d.lns_rounds, EFFORT_QUICK).max(1));

    // A factor, and an explicit key that overrides the effort (even at its default value).
    let f = search("  effort: 2.5\n  budget: { lns_rounds: 6, lns_moves: 10 }\n");
    assert_eq!(f.effort, SearchEffort::Factor(2.5));
    let b = f.budget_counts();
    assert_eq!(b.lns_rounds, 6);
    assert_eq!(b.lns_moves, 10);
    assert_eq!(b.local_moves, scaled(d.local_moves, 2.5));
    // A tiny factor keeps every non-zero count at least 1.
    let tiny = search("  effort: 0.001\n").budget_counts();
    assert_eq!((tiny.lns_rounds, tiny.random_orders), (1, 1));
    assert_eq!(tiny.lns_window_every_gpu, d.lns_window_every_gpu);
    assert_eq!(tiny.lns_window_every_cache, d.lns_window_every_cache);

    for (bad, shown) in [
        ("fast", "string \"fast\""),
        ("0", "floating point `0.0`"),
        ("-1", "floating point `-1.0`"),
        ("100", "floating point `100.0`"),
    ] {
        let y = GOOD.replace(
            "  order: [tmax, deepswe]\n",
            &format!("  order: [tmax, deepswe]\n  effort: {bad}\n"),
        );
        assert_eq!(
            err(&y),
            format!(
                "pipeline.yaml:18: field `search.effort`: invalid value: {shown}, expected `quick`, `default`, `thorough`, or a factor greater than 0 and at most 64"
            )
        );
    }
}

#[test]
fn unknown_key_names_line_and_field() {
    let y = GOOD.replace(
        "    expect: { audited: 267",
        "    colour: red\n    expect: { audited: 267",
    );
    assert_eq!(
        err(&y),
        "pipeline.yaml:10: field `workloads.tmax.colour`: unknown field `colour`, expected one of `layout`, `expect`, `replay`, `published`"
    );
    let y = GOOD.replace("run_dir: runs/demo", "run_dir: runs/demo\nrundir: typo");
    assert!(
        err(&y).starts_with("pipeline.yaml:3: field `rundir`: unknown field `rundir`"),
        "{}",
        err(&y)
    );
}

#[test]
fn missing_field_names_line_and_field() {
    let y = GOOD.replace(", gpus: 8 }\n  deepswe", " }\n  deepswe");
    assert_eq!(
        err(&y),
        "pipeline.yaml:11: field `workloads.tmax.replay`: missing field `gpus`"
    );
}

#[test]
fn bad_type_names_line_and_field() {
    let y = GOOD.replace("seed: 20261129", "seed: twenty");
    assert_eq!(
        err(&y),
        "pipeline.yaml:16: field `search.seed`: invalid type: string \"twenty\", expected u64"
    );
    let y = GOOD.replace("locations: [file, gcs, hf]", "locations: [file, s3]");
    assert!(
        err(&y).starts_with("pipeline.yaml:5: field `sources.locations[1]`: unknown variant `s3`"),
        "{}",
        err(&y)
    );
}

#[test]
fn semantic_errors_name_line_and_field() {
    let y = GOOD.replace("order: [tmax, deepswe]", "order: [tmax]");
    assert_eq!(
        err(&y),
        "pipeline.yaml:17: field `search.order`: workload `deepswe` is configured but missing from the order"
    );
    let y = GOOD.replace("version: 1", "version: 2");
    assert_eq!(
        err(&y),
        "pipeline.yaml:1: field `version`: unsupported version 2, this build reads version 1"
    );
    let y = GOOD.replace("audited: 267, included: 253", "audited: 267, included: 268");
    assert_eq!(
        err(&y),
        "pipeline.yaml:10: field `workloads.tmax.expect.included`: 268 included cannot exceed 267 audited"
    );
    let y = GOOD.replace("concurrency: 32", "concurrency: 0");
    assert_eq!(
        err(&y),
        "pipeline.yaml:14: field `workloads.deepswe.replay.concurrency`: must be at least 1"
    );
    let y = GOOD.replace("  manifest: manifest.csv\n", "");
    assert_eq!(
        err(&y),
        "pipeline.yaml:3: field `sources`: missing `manifest` (a CSV path) or `archives` (inline rows)"
    );
}

#[test]
fn manifest_errors_name_line_and_column() {
    let m = MANIFEST.replace(",324649,", ",lots,");
    assert_eq!(
        merr(&m),
        "manifest.csv:2: field `bytes`: expected a non-negative integer, got `lots`"
    );
    let m = MANIFEST.replace("d38f9994b27ea8f7", "zz");
    assert!(
        merr(&m).starts_with(
            "manifest.csv:2: field `sha256`: archive `tmax-000`: expected 64 hex characters"
        ),
        "{}",
        merr(&m)
    );
    let m = MANIFEST.replace(",1700000000000001,", ",,");
    assert_eq!(
        merr(&m),
        "manifest.csv:2: field `gcs_generation`: archive `tmax-000`: a GCS location needs bucket, object and generation (reads are pinned)"
    );
    let m = MANIFEST.replace("0123456789abcdef0123456789abcdef01234567", "main");
    assert_eq!(
        merr(&m),
        "manifest.csv:3: field `hf_revision`: archive `deepswe-000`: expected a 40-hex lowercase commit, got `main`"
    );
    let m = MANIFEST.replace("deepswe-000,deepswe", "tmax-000,deepswe");
    assert_eq!(
        merr(&m),
        "manifest.csv:3: field `archive_id`: archive `tmax-000`: appears twice in the manifest"
    );
    let m = MANIFEST.replace(",file_path\n", ",file_path,colour\n");
    assert!(
        merr(&m).starts_with("manifest.csv:1: field `colour`: unknown column"),
        "{}",
        merr(&m)
    );
    let m = MANIFEST.replace(",deepswe,", ",swe,");
    assert_eq!(
        merr(&m),
        "manifest.csv:3: field `workload`: archive `deepswe-000`: unknown workload `swe`, expected tmax or deepswe"
    );
    let m = MANIFEST.replace(",org/traces,0123456789abcdef0123456789abcdef01234567,raw/shard-00000.tar,deepswe-000.tar.zst,", ",,,,,");
    assert_eq!(
        merr(&m),
        "manifest.csv:3: field `file_path`: archive `deepswe-000`: has no location: give gcs_*, hf_* or file_path"
    );
}

#[test]
fn inline_archives_are_validated_like_the_csv() {
    let y = GOOD.replace(
        "  manifest: manifest.csv\n",
        "  archives:\n    - { archive_id: a1, workload: tmax, sha256: d38f9994b27ea8f706fa8dec55d2859100c348c50fc6cf9056458665a24ead50, bytes: 10, file_path: a1.tar.gz }\n",
    );
    let (_d, r) = with_files(&y, MANIFEST);
    assert_eq!(r.unwrap().archives[0].archive_id, "a1");
    let y2 = y.replace("bytes: 10,", "bytes: 0,");
    assert_eq!(
        err(&y2),
        "pipeline.yaml:4: field `sources.archives[0].bytes`: archive `a1`: an archive cannot be empty"
    );
}

#[test]
fn missing_file_names_path() {
    let e = load_config_str(Path::new("/nonexistent/pipeline.yaml"), GOOD)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cannot read /nonexistent/manifest.csv:"),
        "{e}"
    );
}

#[test]
fn layout_placeholders_must_be_matchable() {
    let with_layout = |layout: &str| {
        GOOD.replace(
            "  deepswe:\n    expect",
            &format!("  deepswe:\n    layout: {{ {layout} }}\n    expect"),
        )
    };
    assert_eq!(
        err(&with_layout(
            r#"attempt_dir: "deepswe/{task_id}__{attempt_id}/""#
        )),
        "pipeline.yaml:13: field `workloads.deepswe.layout.attempt_dir`: workload `deepswe`: `deepswe/{task_id}__{attempt_id}/` puts 2 placeholders in the path segment `{task_id}__{attempt_id}`; give each placeholder its own path segment"
    );
    assert_eq!(
        err(&with_layout(
            r#"attempt_dir: "deepswe/{attempt_id}/{attempt_id}/""#
        )),
        "pipeline.yaml:13: field `workloads.deepswe.layout.attempt_dir`: workload `deepswe`: `deepswe/{attempt_id}/{attempt_id}/` names the placeholder {attempt_id} more than once"
    );
    assert_eq!(
        err(&with_layout(
            r#"request_start: "requests/{seq}-{seq}.start""#
        )),
        "pipeline.yaml:13: field `workloads.deepswe.layout.request_start`: workload `deepswe`: `requests/{seq}-{seq}.start` names the placeholder {seq} more than once"
    );
    // One placeholder with literal text around it is matchable.
    let (_d, r) = with_files(
        &with_layout(r#"attempt_dir: "deepswe/task-{task_id}/{attempt_id}.d""#),
        MANIFEST,
    );
    assert_eq!(
        r.unwrap().layout(WorkloadId::Deepswe).unwrap().attempt_dir,
        "deepswe/task-{task_id}/{attempt_id}.d/"
    );
}

#[test]
fn numeric_values_out_of_their_range_are_refused_naming_the_range() {
    let with = |block: &str| format!("{GOOD}{block}\n");
    assert_eq!(
        err(&with("ingest:\n  read_timeout_s: 18446744073709551615")),
        "pipeline.yaml:19: field `ingest.read_timeout_s`: must be 1 to 604800, got 18446744073709551615"
    );
    assert_eq!(
        err(&with("ingest:\n  connect_timeout_s: 0")),
        "pipeline.yaml:19: field `ingest.connect_timeout_s`: must be 1 to 604800, got 0"
    );
    assert_eq!(
        err(&with("ingest:\n  retries: 1000")),
        "pipeline.yaml:19: field `ingest.retries`: must be 0 to 100, got 1000"
    );
    assert_eq!(
        err(&with("audit:\n  max_members: 0")),
        "pipeline.yaml:19: field `audit.max_members`: must be 1 to 1125899906842624, got 0"
    );
    assert_eq!(
        err(&GOOD.replace("ram_gib: 66, gpus: 8", "ram_gib: 66, gpus: 0")),
        "pipeline.yaml:11: field `workloads.tmax.replay.gpus`: must be 1 to 1048576, got 0"
    );
    // The bounds themselves are accepted.
    let (_d, r) = with_files(
        &with("ingest:\n  read_timeout_s: 604800\n  rate_limit_patience_s: 0\n  retries: 100"),
        MANIFEST,
    );
    r.unwrap();
}

/// Published figures: `value` within `atol + rtol * |value|`, `max`, `min`; every malformed
/// figure is refused naming its field.
#[test]
fn published_figures_are_checked_with_their_tolerances_and_malformed_ones_refused() {
    let with = |figures: &str| {
        GOOD.replace(
            "    replay: { concurrency: 16, cpu_cores: 27, ram_gib: 66, gpus: 8 }\n",
            &format!(
                "    replay: {{ concurrency: 16, cpu_cores: 27, ram_gib: 66, gpus: 8 }}\n    published:\n{figures}"
            ),
        )
    };
    let (_d, r) = with_files(
        &with(
            "      gpu: { best_found_h: { value: 100, rtol: 0.01, atol: 0.5 }, best_bounds_h: { min: 20 } }\n      cache: { fifo_ideal_h: { max: 9.5 } }\n",
        ),
        MANIFEST,
    );
    let c = r.unwrap();
    let p = &c.config.workloads.get(WorkloadId::Tmax).unwrap().published;
    let names: Vec<String> = p
        .figures()
        .iter()
        .map(|(r, n, _)| format!("{r}.{n}"))
        .collect();
    assert_eq!(
        names,
        [
            "gpu.best_found_h",
            "gpu.best_bounds_h",
            "cache.fifo_ideal_h"
        ]
    );
    let found = p.gpu.as_ref().unwrap().best_found_h.unwrap();
    // |x - 100| <= 0.5 + 0.01 * 100 = 1.5.
    assert!(found.accepts(101.5) && found.accepts(98.5) && found.accepts(100.0));
    assert!(!found.accepts(101.51) && !found.accepts(98.49));
    assert_eq!(found.describe(), "100 (rtol 0.01, atol 0.5)");
    assert_eq!(found.delta(101.0), 1.0);
    let bound = p.gpu.as_ref().unwrap().best_bounds_h.unwrap();
    assert!(bound.accepts(20.0) && bound.accepts(25.0) && !bound.accepts(19.99));
    assert_eq!(bound.describe(), "at least 20");
    let fifo = p.cache.as_ref().unwrap().fifo_ideal_h.unwrap();
    assert!(fifo.accepts(9.5) && !fifo.accepts(9.51));
    assert_eq!(fifo.delta(9.0), -0.5);
    let exact = model::config::PublishedFigure {
        value: Some(3.25),
        ..Default::default()
    };
    assert!(exact.accepts(3.25) && !exact.accepts(3.2500001));

    for (figures, message) in [
        (
            "      gpu: { best_found_h: {} }\n",
            "field `workloads.tmax.published.gpu.best_found_h`: give `value` (with `rtol`/`atol`), `max` or `min`",
        ),
        (
            "      gpu: { best_found_h: { max: 60, rtol: 0.1 } }\n",
            "field `workloads.tmax.published.gpu.best_found_h`: `rtol` and `atol` apply to a `value`; give one",
        ),
        (
            "      gpu: { best_found_h: { value: 60, atol: -1 } }\n",
            "field `workloads.tmax.published.gpu.best_found_h`: `atol` must not be negative, got -1",
        ),
        (
            "      cache: { best_bounds_h: { min: 5, max: 4 } }\n",
            "field `workloads.tmax.published.cache.best_bounds_h`: `min` 5 is above `max` 4",
        ),
        (
            "      gpu: { best_found_h: { value: .nan } }\n",
            "field `workloads.tmax.published.gpu.best_found_h`: `value` must be a finite number, got NaN",
        ),
    ] {
        let e = err(&with(figures));
        assert!(e.ends_with(message), "{e}");
        assert!(e.starts_with("pipeline.yaml:1"), "{e}");
    }
    let e = err(&with("      gpu: { best_found: { max: 60 } }\n"));
    assert!(
        e.contains("field `workloads.tmax.published.gpu.best_found`: unknown field `best_found`, expected one of `fifo_ideal_h`, `best_found_h`, `best_bounds_h`"),
        "{e}"
    );
    let e = err(&with("      disk: { best_found_h: { max: 60 } }\n"));
    assert!(
        e.contains("unknown field `disk`, expected one of `cpu`, `ram`, `gpu`, `cache`"),
        "{e}"
    );
}
