//! The ingest run: for every archive, the store first, then every configured location
//! (bounded parallelism across archives), verification, admission or quarantine, the
//! cross-source identity check, and finally the ledger and `ingest.run.json`.

use crate::error::{FetchError, IngestError};
use crate::ledger::{LEDGER_FILE, LedgerRow, Verdict, write_ledger};
use crate::options::IngestOptions;
use crate::progress::ProgressSink;
use crate::report::{ArchiveFailure, IngestReport};
use crate::sink::{BlobSink, SinkError};
use crate::source::gcs::{GcsCredentials, GcsSettings};
use crate::source::hf::{HfSettings, ShardIndexDirs};
use crate::source::{ArchiveSource, FetchInfo, FetchMethod, FileSource, GcsSource, HfSource};
use crate::store::{LocationCheck, LocationRecord, Store, StoreCheck};
use model::ArchiveSpec;
use model::LoadedConfig;
use model::config::LocationKind;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// File name of the run facts (wall-clock times, host, transfer details).
pub const RUN_JSON_FILE: &str = "ingest.run.json";

/// Location kinds in ledger order.
pub const KIND_ORDER: [LocationKind; 3] = [LocationKind::File, LocationKind::Gcs, LocationKind::Hf];

struct Sources {
    file: Option<FileSource>,
    gcs: Option<GcsSource>,
    hf: Option<HfSource>,
}

impl Sources {
    fn get(&self, kind: LocationKind) -> Option<&dyn ArchiveSource> {
        match kind {
            LocationKind::File => self.file.as_ref().map(|s| s as &dyn ArchiveSource),
            LocationKind::Gcs => self.gcs.as_ref().map(|s| s as &dyn ArchiveSource),
            LocationKind::Hf => self.hf.as_ref().map(|s| s as &dyn ArchiveSource),
        }
    }
}

/// The run's circuit breaker, one per location kind (each kind has one endpoint per run):
/// once a request to an endpoint times out or cannot connect, the fetches still waiting on
/// it end at once and the later ones are not started, each failing with a line that names
/// the first failure. The state is a watch channel, so waiting fetches see it trip.
struct Breakers {
    tripped: tokio::sync::watch::Sender<std::collections::BTreeMap<&'static str, String>>,
}

impl Breakers {
    fn new() -> Breakers {
        Breakers {
            tripped: tokio::sync::watch::Sender::new(Default::default()),
        }
    }

    /// The first failure of the endpoint of `kind`, when it tripped.
    fn cause(&self, kind: &'static str) -> Option<String> {
        self.tripped.borrow().get(kind).cloned()
    }

    /// Trip the breaker of `kind` (the first cause is kept).
    fn trip(&self, kind: &'static str, cause: String) {
        self.tripped.send_if_modified(|m| {
            if m.contains_key(kind) {
                return false;
            }
            m.insert(kind, cause);
            true
        });
    }

    /// Wait until the breaker of `kind` trips; its cause.
    async fn tripped(&self, kind: &'static str) -> String {
        let mut rx = self.tripped.subscribe();
        let cause = rx
            .wait_for(|m| m.contains_key(kind))
            .await
            .ok()
            .and_then(|m| m.get(kind).cloned());
        match cause {
            Some(cause) => cause,
            // The sender lives as long as the run: never reached.
            None => std::future::pending().await,
        }
    }
}

struct Ctx {
    breakers: Breakers,
    store: Store,
    sources: Sources,
    locations: Vec<LocationKind>,
    offline: bool,
    /// `HF_HUB_OFFLINE` made the run offline.
    offline_by_env: bool,
    /// Offline, a location without a verified record of its own does not fail its archive
    /// when the store holds the bytes (its row says `unchecked`).
    accept_unchecked: bool,
    progress: Arc<dyn ProgressSink>,
}

/// Wall-clock facts of one location fetch (for `ingest.run.json`, never the ledger).
#[derive(Debug, Clone, serde::Serialize)]
struct FetchFacts {
    archive_id: String,
    location_kind: &'static str,
    verdict: &'static str,
    bytes: u64,
    elapsed_s: f64,
    resumes: u32,
    retries: u32,
}

#[derive(Default)]
struct ArchiveOutcome {
    rows: Vec<LedgerRow>,
    failures: Vec<ArchiveFailure>,
    downloaded: u64,
    fetches: usize,
    from_store: bool,
    facts: Vec<FetchFacts>,
    store_repairs: Vec<String>,
}

/// Run the ingest stage on its own multi-threaded runtime.
pub fn run(cfg: &LoadedConfig, opts: &IngestOptions) -> Result<IngestReport, IngestError> {
    // A shard locks its own directory: shards of one run directory run at once.
    let below = opts.shard.map(|s| s.relative_dir()).unwrap_or_default();
    let lock_dir = model::run_dir::create_dir_below(&cfg.run_dir, &below)
        .map_err(IngestError::io(&cfg.run_dir.join(&below)))?;
    let _lock = model::RunLock::acquire(&lock_dir, "ingest")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ingest")
        .build()
        .map_err(IngestError::Runtime)?;
    rt.block_on(run_async(cfg, opts))
}

fn archive_has(a: &ArchiveSpec, kind: LocationKind) -> bool {
    match kind {
        LocationKind::File => a.file.is_some(),
        LocationKind::Gcs => a.gcs.is_some(),
        LocationKind::Hf => a.hf.is_some(),
    }
}

async fn build_sources(
    cfg: &LoadedConfig,
    opts: &IngestOptions,
    kinds: &[LocationKind],
) -> Result<Sources, IngestError> {
    let ic = &cfg.config.ingest;
    let timeout = Duration::from_secs(ic.request_timeout_s.max(1));
    let connect_timeout = Duration::from_secs(ic.connect_timeout_s.max(1));
    let read_timeout = Duration::from_secs(ic.read_timeout_s.max(1));
    let needed = |k: LocationKind| {
        !opts.offline && kinds.contains(&k) && cfg.archives.iter().any(|a| archive_has(a, k))
    };
    let gcs = if needed(LocationKind::Gcs) {
        let endpoint = model::config::gcs_endpoint(
            cfg.config.sources.gcs.endpoint.as_deref(),
            opts.env.storage_emulator_host.as_deref(),
        );
        let buckets: Vec<&str> = cfg
            .archives
            .iter()
            .filter_map(|a| a.gcs.as_ref().map(|g| g.bucket.as_str()))
            .collect();
        let credentials = match &endpoint {
            Some(_) => GcsCredentials::Anonymous,
            None => GcsCredentials::detect(&opts.env.gcs_auth)
                .await
                .map_err(IngestError::Config)?,
        };
        let user_project = crate::source::gcs_auth::user_project(
            &opts.env.gcs_auth,
            cfg.config.sources.gcs.user_project.as_deref(),
            &credentials,
        );
        let source = GcsSource::with_timeouts(
            buckets,
            GcsSettings {
                endpoint,
                service_url: None,
                credentials,
                user_project,
                retries: ic.retries,
                request_timeout: timeout,
                initial_backoff: opts.initial_backoff,
            },
            connect_timeout,
            read_timeout,
        )?;
        opts.progress.note(&source.clients().describe());
        Some(source)
    } else {
        None
    };
    let hf = if needed(LocationKind::Hf) {
        let endpoint = model::config::hf_endpoint(
            cfg.config.sources.hf.endpoint.as_deref(),
            opts.env.hf_endpoint.as_deref(),
        );
        if reqwest::Url::parse(&endpoint).is_err() {
            return Err(IngestError::Config(format!(
                "Hub endpoint `{endpoint}` is not a URL"
            )));
        }
        Some(HfSource::with_timeouts(
            HfSettings {
                endpoint,
                token: opts.env.hf_token.clone(),
                retries: ic.retries,
                request_timeout: timeout,
                initial_backoff: opts.initial_backoff,
                rate_limit_patience: Duration::from_secs(ic.rate_limit_patience_s),
                progress: opts.progress.clone(),
                shard_index: ShardIndexDirs::for_run(
                    &cfg.run_dir,
                    cfg.config
                        .sources
                        .manifest
                        .as_deref()
                        .map(|m| cfg.path.parent().unwrap_or(Path::new("")).join(m))
                        .as_deref(),
                ),
            },
            connect_timeout,
            read_timeout,
        )?)
    } else {
        None
    };
    Ok(Sources {
        file: needed(LocationKind::File).then_some(FileSource),
        gcs,
        hf,
    })
}

/// Run the ingest stage inside an existing runtime.
pub async fn run_async(
    cfg: &LoadedConfig,
    opts: &IngestOptions,
) -> Result<IngestReport, IngestError> {
    let started_wall = SystemTime::now();
    let started = Instant::now();
    // `HF_HUB_OFFLINE` asks what `--offline` asks: no location is contacted.
    let env_offline;
    let opts = if opts.env.hf_hub_offline && !opts.offline {
        opts.progress.note(
            "HF_HUB_OFFLINE is set: working from the verified store alone, as with --offline",
        );
        env_offline = IngestOptions {
            offline: true,
            ..opts.clone()
        };
        &env_offline
    } else {
        opts
    };
    let whole = cfg;
    let narrowed = opts.shard.map(|s| s.narrow(cfg));
    let cfg = narrowed.as_ref().unwrap_or(cfg);
    let store = match opts.shard {
        Some(_) => Store::open_for(
            &whole.run_dir,
            &cfg.archives
                .iter()
                .map(|a| a.archive_id.clone())
                .collect::<Vec<_>>(),
        )?,
        None => Store::open(&cfg.run_dir)?,
    };
    let locations: Vec<LocationKind> = KIND_ORDER
        .into_iter()
        .filter(|k| cfg.config.sources.locations.contains(k))
        .collect();
    let sources = build_sources(cfg, opts, &locations).await?;
    let parallel = opts
        .parallel
        .unwrap_or(cfg.config.ingest.parallel as usize)
        .max(1);
    let progress = opts.progress.clone();
    let planned: u64 = cfg
        .archives
        .iter()
        .map(|a| a.bytes * locations.iter().filter(|k| archive_has(a, **k)).count() as u64)
        .sum();
    progress.begin(cfg.archives.len() as u64, planned);
    let ctx = Arc::new(Ctx {
        breakers: Breakers::new(),
        store: store.clone(),
        sources,
        locations,
        offline: opts.offline,
        offline_by_env: opts.env.hf_hub_offline,
        accept_unchecked: opts.accept_unchecked,
        progress: progress.clone(),
    });
    let semaphore = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut set = tokio::task::JoinSet::new();
    for (i, archive) in cfg.archives.iter().cloned().enumerate() {
        let ctx = ctx.clone();
        let semaphore = semaphore.clone();
        set.spawn(async move {
            let _permit = semaphore.acquire_owned().await.expect("semaphore open");
            (i, ingest_archive(&ctx, &archive).await)
        });
    }
    let mut outcomes: Vec<(usize, ArchiveOutcome)> = Vec::with_capacity(cfg.archives.len());
    let mut fatal = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, Ok(o))) => outcomes.push((i, o)),
            Ok((_, Err(e))) => {
                if fatal.is_none() {
                    fatal = Some(e);
                }
            }
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
    progress.finish();
    if opts.shard.is_none() {
        // (shards share `store/tmp/` with others that may be about to write into it)
        store.tidy();
    }
    if let Some(e) = fatal {
        return Err(e);
    }
    outcomes.sort_by_key(|(i, _)| *i);
    // A shard writes its ledger part and facts in its own directory.
    let out_dir = match opts.shard {
        Some(shard) => shard.dir(&whole.run_dir),
        None => store.run_dir().root().to_path_buf(),
    };
    let ledger_path = out_dir.join(LEDGER_FILE);
    let run_json_path = out_dir.join(RUN_JSON_FILE);
    let mut report = IngestReport {
        ledger: Vec::new(),
        failures: Vec::new(),
        archives: cfg.archives.len(),
        verified_archives: 0,
        served_from_store: 0,
        fetches: 0,
        downloaded_bytes: 0,
        offline: opts.offline,
        ledger_path: ledger_path.clone(),
        run_json_path: run_json_path.clone(),
    };
    let mut facts = Vec::new();
    let mut repairs = Vec::new();
    for (_, o) in outcomes {
        if o.failures.is_empty() {
            report.verified_archives += 1;
        }
        report.served_from_store += o.from_store as usize;
        report.fetches += o.fetches;
        report.downloaded_bytes += o.downloaded;
        report.ledger.extend(o.rows);
        report.failures.extend(o.failures);
        facts.extend(o.facts);
        repairs.extend(o.store_repairs);
    }
    write_ledger(&ledger_path, &report.ledger)?;
    let unix = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    };
    let doc = serde_json::json!({
        "format_version": model::run_dir::JSON_FORMAT_VERSION,
        "stage": "ingest",
        "tool_version": model::TOOL_VERSION,
        "config": cfg.path.display().to_string(),
        "config_sha256": cfg.sha256,
        "host": model::process::host_name().unwrap_or_default(),
        "started_unix_s": unix(started_wall),
        "finished_unix_s": unix(SystemTime::now()),
        "elapsed_s": started.elapsed().as_secs_f64(),
        "offline": opts.offline,
        "parallel": parallel,
        "archives": report.archives,
        "verified_archives": report.verified_archives,
        "served_from_store": report.served_from_store,
        "fetches": report.fetches,
        "downloaded_bytes": report.downloaded_bytes,
        "nothing_downloaded": report.nothing_downloaded(),
        "failures": report.failures.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
        "store_repairs": repairs,
        "store_policy": "stored blobs are re-hashed before they are trusted",
        "fetch_facts": facts,
    });
    let text = serde_json::to_string_pretty(&doc).expect("json") + "\n";
    frames::atomic_write(&run_json_path, text.as_bytes())?;
    if let Some(shard) = opts.shard {
        let record = model::shard::ShardRecord::new(crate::stage::STAGE_NAME, shard, whole)
            .with_parts(&out_dir, [LEDGER_FILE.to_string()])
            .map_err(IngestError::io(&ledger_path))?;
        let path = out_dir.join(model::shard::ShardRecord::file_name(
            crate::stage::STAGE_NAME,
        ));
        let text = serde_json::to_string_pretty(&record).expect("json") + "\n";
        frames::atomic_write(&path, text.as_bytes())?;
    }
    if report.failures.is_empty() {
        Ok(report)
    } else {
        Err(IngestError::ArchivesFailed {
            report: Box::new(report),
        })
    }
}

/// `ingest --config F merge`: check that the finished ingest shards below
/// `run_dir/shards/` are exactly the N parts of this config's manifest, and write their
/// ledger parts as one `ledger.parquet`, rows in manifest order (each archive's rows in
/// location kind order, as a one-process run writes them). Returns the merged rows; an
/// archive without a good row fails the merge (after the ledger is written), as it fails
/// a one-process ingest.
pub fn merge_shards(cfg: &LoadedConfig) -> Result<Vec<crate::LedgerRow>, IngestError> {
    let _lock = model::RunLock::acquire(&cfg.run_dir, "ingest merge")?;
    let shards = model::shard::check_shards(cfg, crate::stage::STAGE_NAME)?;
    let order: std::collections::HashMap<&str, usize> = cfg
        .archives
        .iter()
        .enumerate()
        .map(|(i, a)| (a.archive_id.as_str(), i))
        .collect();
    let mut rows = Vec::new();
    for (shard, record) in &shards {
        rows.extend(crate::ledger::read_ledger(
            &record.part_path(&shard.dir(&cfg.run_dir), LEDGER_FILE)?,
        )?);
    }
    rows.sort_by_key(|r| {
        order
            .get(r.archive_id.as_str())
            .copied()
            .unwrap_or(usize::MAX)
    });
    write_ledger(&cfg.run_dir.join(LEDGER_FILE), &rows)?;
    let failed: Vec<String> = cfg
        .archives
        .iter()
        .filter(|a| {
            !rows
                .iter()
                .any(|r| r.archive_id == a.archive_id && r.verdict.is_ok())
        })
        .map(|a| a.archive_id.clone())
        .collect();
    if !failed.is_empty() {
        return Err(IngestError::MergedFailures(failed));
    }
    Ok(rows)
}

fn kind_uri(a: &ArchiveSpec, kind: LocationKind) -> String {
    match kind {
        LocationKind::File => crate::source::file::file_uri(a),
        LocationKind::Gcs => crate::source::gcs::gcs_uri(a),
        LocationKind::Hf => crate::source::hf::hf_uri(a),
    }
    .unwrap_or_default()
}

fn base_row(a: &ArchiveSpec, kind: &str, uri: String) -> LedgerRow {
    LedgerRow {
        archive_id: a.archive_id.clone(),
        workload: a.workload.as_str().to_string(),
        location_kind: kind.to_string(),
        uri,
        generation: if kind == "gcs" {
            a.gcs.as_ref().map(|g| g.generation)
        } else {
            None
        },
        revision: if kind == "hf" {
            a.hf.as_ref().map(|h| h.revision.clone())
        } else {
            None
        },
        resolved_commit: None,
        expected_sha256: a.sha256.clone(),
        actual_sha256: None,
        expected_bytes: a.bytes,
        actual_bytes: None,
        verdict: Verdict::Error,
        error: None,
        served_from_store: false,
        method: None,
        cross_source_identical: None,
        quarantine_path: None,
    }
}

fn expected_text(a: &ArchiveSpec) -> String {
    format!("expected sha256 {} ({} bytes)", a.sha256, a.bytes)
}

/// An error's text without its leading `uri: ` (the failure line names the location).
fn without_uri(e: &FetchError, uri: &str) -> String {
    let t = e.to_string();
    t.strip_prefix(&format!("{uri}: "))
        .map(str::to_string)
        .unwrap_or(t)
}

async fn ingest_archive(ctx: &Ctx, a: &ArchiveSpec) -> Result<ArchiveOutcome, IngestError> {
    let mut out = ArchiveOutcome::default();
    let kinds: Vec<LocationKind> = ctx
        .locations
        .iter()
        .copied()
        .filter(|k| archive_has(a, *k))
        .collect();
    if kinds.is_empty() {
        let mut row = base_row(a, "none", String::new());
        row.verdict = Verdict::NoLocation;
        let kinds_text: Vec<&str> = ctx.locations.iter().map(|k| k.as_str()).collect();
        row.error = Some(format!(
            "the archive has no location of the configured kinds [{}]",
            kinds_text.join(", ")
        ));
        out.failures.push(ArchiveFailure {
            archive_id: a.archive_id.clone(),
            location: "(none)".into(),
            problem: format!(
                "{}; no location of the kinds [{}]",
                expected_text(a),
                kinds_text.join(", ")
            ),
            hint: "add a location to the manifest or a kind to sources.locations".into(),
        });
        out.rows.push(row);
        ctx.progress.archive_done(&a.archive_id, "no_location");
        return Ok(out);
    }
    let store_check = {
        let store = ctx.store.clone();
        let (id, sha, bytes) = (a.archive_id.clone(), a.sha256.clone(), a.bytes);
        tokio::task::spawn_blocking(move || store.check(&id, &sha, bytes))
            .await
            .expect("store check task")?
    };
    if let StoreCheck::Corrupt {
        actual_sha256,
        quarantined,
        ..
    } = &store_check
    {
        let line = format!(
            "{}: stored blob had sha256 {actual_sha256}; moved to {quarantined}",
            a.archive_id
        );
        ctx.progress.note(&line);
        out.store_repairs.push(line);
    }
    let blob_known = store_check == StoreCheck::Verified;
    // Locations that have no verified record of their own, under --offline.
    let mut unchecked: Vec<String> = Vec::new();
    for k in &kinds {
        let uri = kind_uri(a, *k);
        if blob_known {
            match ctx.store.location_check(&a.sha256, a.bytes, &uri) {
                LocationCheck::Verified(record) => {
                    let mut row = base_row(a, k.as_str(), uri);
                    row.verdict = Verdict::InStore;
                    row.served_from_store = true;
                    row.actual_sha256 = Some(a.sha256.clone());
                    row.actual_bytes = Some(a.bytes);
                    row.resolved_commit = record.resolved_commit;
                    row.method = Some(FetchMethod::Store.as_str().into());
                    out.rows.push(row);
                    ctx.progress.advance_bytes(a.bytes);
                    continue;
                }
                LocationCheck::Unusable(why) => {
                    ctx.progress.note(&format!(
                        "{}: location record ignored, the location is checked again: {why}",
                        a.archive_id
                    ));
                }
                LocationCheck::Unverified => {}
            }
        }
        if ctx.offline {
            let mut row = base_row(a, k.as_str(), uri.clone());
            if blob_known {
                row.error = Some(
                    "offline: the store holds the verified bytes, but this location has never delivered them"
                        .into(),
                );
                row.verdict = if ctx.accept_unchecked {
                    Verdict::Unchecked
                } else {
                    Verdict::SkippedOffline
                };
                unchecked.push(uri);
            } else {
                row.verdict = Verdict::SkippedOffline;
                row.error = Some("offline, and the store does not hold this archive".into());
            }
            out.rows.push(row);
            continue;
        }
        let source = ctx
            .sources
            .get(*k)
            .expect("a source is built for every configured kind in use");
        fetch_location(ctx, a, source, &mut out).await?;
    }
    if ctx.offline && !blob_known {
        out.failures.push(ArchiveFailure {
            archive_id: a.archive_id.clone(),
            location: model::run_dir::stored_archive_relative(&a.sha256),
            problem: format!("{}; not in the store (offline)", expected_text(a)),
            hint: offline_hint(ctx, "to fetch it"),
        });
        ctx.progress.archive_done(&a.archive_id, "missing_offline");
        return Ok(out);
    }
    if !unchecked.is_empty() && !ctx.accept_unchecked {
        out.failures.push(ArchiveFailure {
            archive_id: a.archive_id.clone(),
            location: unchecked.join(", "),
            problem: format!(
                "{}; the store holds these bytes, but {} never delivered them, and offline {} not checked",
                expected_text(a),
                if unchecked.len() == 1 { "this location" } else { "these locations" },
                if unchecked.len() == 1 { "it is" } else { "they are" },
            ),
            hint: offline_hint(
                ctx,
                "to check them, or pass --accept-unchecked to use the stored bytes regardless",
            ),
        });
    }
    if out.rows.iter().all(|r| r.verdict == Verdict::InStore) {
        out.from_store = true;
    }
    // Cross-source identity: every location that delivered bytes, in this run or (by its
    // record) in an earlier one, must agree.
    let delivered: Vec<(String, String, u64)> = out
        .rows
        .iter()
        .filter_map(|r| Some((r.uri.clone(), r.actual_sha256.clone()?, r.actual_bytes?)))
        .collect();
    if delivered.len() >= 2 {
        let identical = delivered.iter().all(|d| d.1 == delivered[0].1);
        for r in out.rows.iter_mut().filter(|r| r.actual_sha256.is_some()) {
            r.cross_source_identical = Some(identical);
        }
        if !identical {
            out.failures.push(ArchiveFailure {
                archive_id: a.archive_id.clone(),
                location: delivered.iter().map(|d| d.0.as_str()).collect::<Vec<_>>().join(" vs "),
                problem: format!(
                    "locations disagree: {}",
                    delivered
                        .iter()
                        .map(|d| format!("{} gives sha256 {} ({} bytes)", d.0, d.1, d.2))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                hint: "cross-source identity failed; the location matching the manifest holds the original".into(),
            });
        } else if delivered[0].1 != a.sha256 {
            // Every location agrees on other bytes: the manifest is the likely culprit.
            for f in out.failures.iter_mut() {
                f.hint = format!(
                    "all {} locations agree on sha256 {}; the manifest's sha256/bytes are probably wrong",
                    delivered.len(),
                    delivered[0].1
                );
            }
        }
    }
    let status = if !out.failures.is_empty() {
        "failed"
    } else if out.from_store {
        "in_store"
    } else {
        "verified"
    };
    ctx.progress.archive_done(&a.archive_id, status);
    Ok(out)
}

async fn fetch_location(
    ctx: &Ctx,
    a: &ArchiveSpec,
    source: &dyn ArchiveSource,
    out: &mut ArchiveOutcome,
) -> Result<(), IngestError> {
    let kind = source.kind().as_str();
    let uri = source.uri(a).unwrap_or_default();
    let mut row = base_row(a, kind, uri.clone());
    let tmp = ctx.store.temp_path(&a.archive_id, kind);
    let mut sink = BlobSink::create(&tmp, a.bytes, ctx.progress.clone()).map_err(sink_fatal)?;
    let started = Instant::now();
    let mut info = FetchInfo::default();
    let down = |cause: String, waiting: bool| FetchError::EndpointDown {
        uri: uri.clone(),
        waiting,
        cause,
    };
    let result = match ctx.breakers.cause(kind) {
        Some(cause) => Err(down(cause, false)),
        None => {
            out.fetches += 1;
            tokio::select! {
            r = source.fetch(a, &mut sink, &mut info) => r,
            cause = ctx.breakers.tripped(kind) => Err(down(cause, true)),
            }
        }
    };
    if let Err(e) = &result
        && e.endpoint_down()
    {
        ctx.breakers
            .trip(kind, format!("archive {} at {e}", a.archive_id));
    }
    // What the fetch learned counts whether or not it succeeded.
    let mut facts = FetchFacts {
        archive_id: a.archive_id.clone(),
        location_kind: source.kind().as_str(),
        verdict: "",
        bytes: 0,
        elapsed_s: 0.0,
        resumes: info.resumes,
        retries: info.retries,
    };
    match result {
        Ok(()) => {
            let blob = sink.finish().map_err(sink_fatal)?;
            out.downloaded += blob.bytes;
            facts.bytes = blob.bytes;
            row.actual_sha256 = Some(blob.sha256.clone());
            row.actual_bytes = Some(blob.bytes);
            row.method = Some(info.method.as_str().into());
            row.resolved_commit = info.resolved_commit.clone();
            if blob.sha256 == a.sha256 && blob.bytes == a.bytes {
                row.verdict = Verdict::Verified;
                let store = ctx.store.clone();
                let record = LocationRecord {
                    format_version: crate::store::LOCATION_RECORD_VERSION,
                    sha256: a.sha256.clone(),
                    bytes: a.bytes,
                    location_kind: kind.to_string(),
                    uri: uri.clone(),
                    resolved_commit: row.resolved_commit.clone(),
                    method: row.method.clone(),
                };
                tokio::task::spawn_blocking(move || {
                    store.admit(blob)?;
                    store.record_location(&record)
                })
                .await
                .expect("admit task")?;
            } else {
                row.verdict = Verdict::Mismatch;
                let (sha, n) = (blob.sha256.clone(), blob.bytes);
                let store = ctx.store.clone();
                let (id, k) = (a.archive_id.clone(), kind.to_string());
                let rel = tokio::task::spawn_blocking(move || store.quarantine(blob, &id, &k))
                    .await
                    .expect("quarantine task")?;
                let problem = format!("{}, got sha256 {sha} ({n} bytes)", expected_text(a));
                row.error = Some(format!("{problem}; kept as {rel}"));
                row.quarantine_path = Some(rel);
                let hint = if n < a.bytes {
                    "the location holds fewer bytes: a truncated object, or the wrong generation/revision"
                } else {
                    "the location holds other bytes: tampered, the wrong generation/revision, or a wrong manifest sha256"
                };
                out.failures.push(ArchiveFailure {
                    archive_id: a.archive_id.clone(),
                    location: uri.clone(),
                    problem,
                    hint: hint.into(),
                });
            }
        }
        Err(e) => {
            drop(sink);
            if let FetchError::Sink(SinkError::Io { .. }) = &e {
                return Err(sink_fatal_fetch(e));
            }
            let oversize = matches!(
                e,
                FetchError::Oversize { .. } | FetchError::Sink(SinkError::Oversize { .. })
            );
            row.verdict = if oversize {
                Verdict::Mismatch
            } else {
                Verdict::Error
            };
            row.error = Some(e.to_string());
            // The commit the Hub resolved to before the failure, else the one a pin
            // mismatch names.
            row.resolved_commit = info
                .resolved_commit
                .clone()
                .or_else(|| e.resolved_commit().map(str::to_string));
            out.failures.push(ArchiveFailure {
                archive_id: a.archive_id.clone(),
                location: uri.clone(),
                problem: format!(
                    "{}, got no verified bytes: {}",
                    expected_text(a),
                    without_uri(&e, &uri)
                ),
                hint: e.hint().into(),
            });
        }
    }
    facts.verdict = row.verdict.as_str();
    facts.elapsed_s = started.elapsed().as_secs_f64();
    out.facts.push(facts);
    out.rows.push(row);
    Ok(())
}

fn offline_hint(ctx: &Ctx, what: &str) -> String {
    if ctx.offline_by_env {
        format!("unset HF_HUB_OFFLINE (and run without --offline) {what}")
    } else {
        format!("run without --offline {what}")
    }
}

fn sink_fatal(e: SinkError) -> IngestError {
    match e {
        SinkError::Io { path, source } => IngestError::Io { path, source },
        other => IngestError::Config(other.to_string()),
    }
}

fn sink_fatal_fetch(e: FetchError) -> IngestError {
    match e {
        FetchError::Sink(s) => sink_fatal(s),
        other => IngestError::Config(other.to_string()),
    }
}
