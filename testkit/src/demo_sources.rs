//! Local stand-ins for the study's real sources, serving a demo corpus (`pipeline demo`):
//! the real GCS emulator with a versioned bucket holding every archive, and the local Hub
//! serving the corpus's raw shards at the demo commit with branch `main` pointing at it.
//! Every third archive gets an older generation first (other bytes), so the bucket has
//! history and only the live generation holds the archive. Used by the `demo-sources`
//! binary (the README walkthrough) and by tests.

use crate::{FakeGcsServer, HubServer, TestkitError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoSourcesOptions {
    /// Bucket to create (versioned).
    pub bucket: String,
    /// Object-name folder of the archives.
    pub prefix: String,
    /// Loopback port of the GCS emulator (0: ephemeral).
    pub gcs_port: u16,
    /// Loopback port of the Hub (0: ephemeral).
    pub hub_port: u16,
}

impl Default for DemoSourcesOptions {
    fn default() -> Self {
        DemoSourcesOptions {
            bucket: "agentrace-demo".into(),
            prefix: "archives".into(),
            gcs_port: 0,
            hub_port: 0,
        }
    }
}

/// The running stand-ins. Dropping them stops both.
#[derive(Debug)]
pub struct DemoSources {
    /// The GCS emulator.
    pub gcs: FakeGcsServer,
    /// The Hub and its content host.
    pub hub: HubServer,
    /// What was published, one line per source.
    pub summary: Vec<String>,
}

impl DemoSources {
    /// Publish the corpus in `corpus` (its `pipeline.yaml` and manifest: every archive with
    /// a file goes to GCS as `<prefix>/<file name>`, every raw shard named by the manifest
    /// is served from `<corpus>/shards/<shard file name>`).
    pub fn start(corpus: &Path, opts: &DemoSourcesOptions) -> Result<DemoSources, TestkitError> {
        let cfg = model::load_config(&corpus.join("pipeline.yaml"))
            .map_err(|e| TestkitError::Fixture(format!("reading the demo corpus: {e}")))?;
        let gcs = if opts.gcs_port == 0 {
            FakeGcsServer::start()?
        } else {
            FakeGcsServer::start_on(opts.gcs_port)?
        };
        gcs.create_bucket(&opts.bucket, true)?;
        let mut older = 0;
        for (i, a) in cfg.archives.iter().enumerate() {
            let Some(file) = &a.file else { continue };
            let name = file
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let object = if opts.prefix.is_empty() {
                name
            } else {
                format!("{}/{name}", opts.prefix)
            };
            if i % 3 == 0 {
                let earlier = format!("an earlier upload of {object} (not the archive)\n");
                gcs.upload_bytes(&opts.bucket, &object, earlier.into_bytes())?;
                older += 1;
            }
            gcs.upload_file(&opts.bucket, &object, &file.path)?;
        }
        let hub = HubServer::start_on(opts.hub_port)?;
        // (repo, commit) -> shard path -> local file
        let mut shards: BTreeMap<(String, String), BTreeMap<String, PathBuf>> = BTreeMap::new();
        for a in &cfg.archives {
            if let Some(h) = &a.hf {
                let local = corpus.join("shards").join(ingest::pin::base_name(&h.shard));
                shards
                    .entry((h.repo.clone(), h.revision.clone()))
                    .or_default()
                    .insert(h.shard.clone(), local);
            }
        }
        let mut summary = vec![format!(
            "GCS emulator (fake-gcs-server): {}, versioned bucket `{}`: {} archives under {}/ ({older} with an older generation)",
            gcs.url(),
            opts.bucket,
            cfg.archives.iter().filter(|a| a.file.is_some()).count(),
            opts.prefix
        )];
        for ((repo, commit), files) in &shards {
            for (path, local) in files {
                hub.add_file(repo, commit, path, local)?;
            }
            hub.set_branch(repo, "main", commit);
            summary.push(format!(
                "Hub: {} (content host {}), dataset `{repo}`: branch main -> commit {commit}, {} raw shards",
                hub.endpoint(),
                hub.content_origin(),
                files.len()
            ));
        }
        Ok(DemoSources { gcs, hub, summary })
    }
}
