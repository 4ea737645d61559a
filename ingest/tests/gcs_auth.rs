//! The GCS credential chain and GCS's refusals, against a strict stand-in
//! (`testkit::GcsAuthGate`) in front of the real fake-gcs-server: each credential source
//! (the metadata server via `GCE_METADATA_HOST`, gcloud's application-default login found
//! through `CLOUDSDK_CONFIG`, a service-account key, an impersonated service account,
//! workload identity federation, anonymous), requester pays (`x-goog-user-project` from the
//! config, `GOOGLE_CLOUD_QUOTA_PROJECT` or the file's `quota_project_id`), and each refusal
//! (401, 403, 404, requester pays, no token) with its own message and hint.

use ingest::FetchError;
use ingest::sink::{ByteSink, SinkError};
use ingest::source::gcs::{
    CredentialsKind, CredentialsOrigin, GcsAuthEnv, GcsCredentials, GcsRefusal, GcsSettings,
    RefusalKind,
};
use ingest::source::gcs_auth::user_project;
use ingest::source::{ArchiveSource, FetchInfo, GcsSource};
use model::manifest::GcsLocation;
use model::{ArchiveSpec, WorkloadId};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use testkit::{FakeGcsServer, GcsAuthGate};

const PRIVATE: &str = "lab-private";
const PUBLIC: &str = "lab-public";
const PAYER: &str = "lab-requester-pays";
const OBJECT: &str = "archives/tmax-0001.tar.gz";
const VM: &str = "vm-default@lab.iam.gserviceaccount.com";
const ALICE: &str = "alice@example.com";
const READER_SA: &str = "reader@lab.iam.gserviceaccount.com";
const KEY_SA: &str = "key-holder@lab.iam.gserviceaccount.com";
const WORKLOAD: &str = "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/ci/subject/runner";
const BILLING: &str = "lab-billing";

/// fake-gcs-server with the same object in three buckets, behind the gate; every principal
/// of these tests may read the private and the requester-pays bucket, except where a test
/// says otherwise.
struct Stand {
    _gcs: FakeGcsServer,
    gate: GcsAuthGate,
    dir: tempfile::TempDir,
    bytes: Vec<u8>,
    generations: std::collections::BTreeMap<&'static str, i64>,
    /// One runtime for every request of a test (the clients keep connections to it).
    rt: tokio::runtime::Runtime,
}

fn stand() -> Stand {
    let gcs = FakeGcsServer::start().unwrap_or_else(|e| panic!("fake-gcs-server: {e}"));
    // gzip's magic, then filler: an archive by its first bytes (what `pipeline pin` takes).
    let mut bytes: Vec<u8> = vec![0x1f, 0x8b];
    bytes.extend((0..40_000u32).map(|i| (i * 7 % 251) as u8));
    let mut generations = std::collections::BTreeMap::new();
    for b in [PRIVATE, PUBLIC, PAYER] {
        gcs.create_bucket(b, true).unwrap();
        generations.insert(b, gcs.upload_bytes(b, OBJECT, bytes.clone()).unwrap());
    }
    let gate = GcsAuthGate::start(&gcs.url()).unwrap();
    let everyone = [VM, ALICE, READER_SA, KEY_SA, WORKLOAD];
    gate.add_bucket(PUBLIC, &["allUsers"], false);
    gate.add_bucket(PRIVATE, &everyone, false);
    gate.add_bucket(PAYER, &everyone, true);
    gate.add_billing_project(BILLING, &everyone);
    Stand {
        _gcs: gcs,
        gate,
        dir: tempfile::tempdir().unwrap(),
        bytes,
        generations,
        rt: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap(),
    }
}

/// A loopback address nothing listens on: a metadata server that is not there.
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap().to_string();
    drop(l);
    a
}

impl Stand {
    /// An environment with nothing set but a home without gcloud files and no metadata
    /// server.
    fn env(&self) -> GcsAuthEnv {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        GcsAuthEnv {
            home: Some(home),
            gce_metadata_host: Some(closed_port()),
            ..GcsAuthEnv::default()
        }
    }

    fn write_json(&self, name: &str, v: &serde_json::Value) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
        p
    }

    /// An authorized-user file as `gcloud auth application-default login` writes it, whose
    /// refresh goes to the gate's token endpoint; the gate knows the refresh token as
    /// alice's.
    fn alice_login(&self) -> serde_json::Value {
        self.gate.add_user(
            "client-1.apps",
            "client-secret-1",
            "1//refresh-alice",
            ALICE,
        );
        serde_json::json!({
            "type": "authorized_user",
            "client_id": "client-1.apps",
            "client_secret": "client-secret-1",
            "refresh_token": "1//refresh-alice",
            "token_uri": self.gate.token_uri(),
        })
    }

    fn archive(&self, bucket: &str) -> ArchiveSpec {
        ArchiveSpec {
            archive_id: "tmax-0001".into(),
            workload: WorkloadId::Tmax,
            sha256: hex::encode(Sha256::digest(&self.bytes)),
            bytes: self.bytes.len() as u64,
            gcs: Some(GcsLocation {
                bucket: bucket.into(),
                object: OBJECT.into(),
                generation: *self.generations.get(bucket).unwrap_or(&1),
            }),
            hf: None,
            file: None,
        }
    }

    /// A source over the real-service code path, aimed at the gate, with the chain's
    /// credentials and the user project chosen as ingest chooses it.
    fn source(
        &self,
        env: &GcsAuthEnv,
        configured_project: Option<&str>,
        buckets: &[&str],
    ) -> (GcsSource, GcsCredentials) {
        let credentials = self
            .rt
            .block_on(GcsCredentials::detect(env))
            .unwrap_or_else(|e| panic!("credential chain: {e}"));
        let _in_runtime = self.rt.enter();
        let source = GcsSource::with_timeouts(
            buckets.iter().copied(),
            GcsSettings {
                endpoint: None,
                service_url: Some(self.gate.url()),
                user_project: user_project(env, configured_project, &credentials),
                credentials: credentials.clone(),
                retries: 1,
                request_timeout: Duration::from_secs(30),
                initial_backoff: Duration::from_millis(5),
            },
            Duration::from_secs(5),
            Duration::from_secs(10),
        )
        .unwrap();
        (source, credentials)
    }

    fn fetch(&self, source: &GcsSource, bucket: &str) -> Result<Vec<u8>, FetchError> {
        let archive = self.archive(bucket);
        let mut sink = VecSink(Vec::new());
        let mut info = FetchInfo::full_object();
        self.rt
            .block_on(source.fetch(&archive, &mut sink, &mut info))?;
        Ok(sink.0)
    }

    /// The principals of the requests the gate let through.
    fn served_principals(&self) -> Vec<Option<String>> {
        self.gate
            .requests()
            .into_iter()
            .filter(|r| r.admitted)
            .map(|r| r.principal)
            .collect()
    }
}

struct VecSink(Vec<u8>);

impl ByteSink for VecSink {
    fn offset(&self) -> u64 {
        self.0.len() as u64
    }
    fn write(&mut self, chunk: &[u8]) -> Result<(), SinkError> {
        self.0.extend_from_slice(chunk);
        Ok(())
    }
}

fn refusal(e: FetchError) -> GcsRefusal {
    match e {
        FetchError::GcsRefused { refusal, .. } => *refusal,
        other => panic!("expected a GCS refusal, got: {other}"),
    }
}

#[test]
fn the_metadata_server_named_by_gce_metadata_host_signs_the_requests() {
    let s = stand();
    s.gate.set_metadata_account(VM);
    let env = GcsAuthEnv {
        gce_metadata_host: Some(s.gate.metadata_host()),
        ..s.env()
    };
    let (source, credentials) = s.source(&env, None, &[PRIVATE]);
    assert_eq!(
        credentials,
        GcsCredentials::MetadataServer {
            url: format!("http://{}", s.gate.metadata_host())
        }
    );
    assert_eq!(
        source.clients().describe(),
        format!(
            "GCS credentials: the metadata server at http://{}",
            s.gate.metadata_host()
        )
    );
    assert_eq!(s.fetch(&source, PRIVATE).unwrap(), s.bytes);
    assert_eq!(s.served_principals(), vec![Some(VM.to_string())]);
    // The probe (with Metadata-Flavor, as google-auth sends it), then the token.
    let asked: Vec<(String, u16)> = s
        .gate
        .issuer_requests()
        .into_iter()
        .map(|r| (r.target.split('?').next().unwrap().to_string(), r.status))
        .collect();
    assert_eq!(asked[0], ("/".to_string(), 200), "{asked:?}");
    assert!(
        asked.contains(&(
            "/computeMetadata/v1/instance/service-accounts/default/token".to_string(),
            200
        )),
        "{asked:?}"
    );
}

#[test]
fn without_a_metadata_server_the_chain_ends_anonymous_after_a_short_probe() {
    let s = stand();
    // Nothing listens: refused at once.
    let (source, credentials) = s.source(&s.env(), None, &[PUBLIC, PRIVATE]);
    assert_eq!(credentials, GcsCredentials::Anonymous);
    assert_eq!(
        source.clients().describe(),
        "GCS credentials: no credentials (unsigned requests)"
    );
    assert_eq!(s.fetch(&source, PUBLIC).unwrap(), s.bytes);
    assert_eq!(s.served_principals(), vec![None]);
    // A listener that never answers: one probe, bounded by GCE_METADATA_TIMEOUT.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let env = GcsAuthEnv {
        gce_metadata_host: Some(silent.local_addr().unwrap().to_string()),
        gce_metadata_timeout: Some(1),
        ..s.env()
    };
    let started = Instant::now();
    let found = s.rt.block_on(GcsCredentials::detect(&env)).unwrap();
    assert_eq!(found, GcsCredentials::Anonymous);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the probe waited {:?}",
        started.elapsed()
    );
    // Unsigned requests to a private bucket: GCS's 403 for the anonymous caller.
    let r = refusal(s.fetch(&source, PRIVATE).unwrap_err());
    assert_eq!(r.kind, RefusalKind::PermissionDenied);
    assert!(r.anonymous);
    assert!(
        r.message
            .contains("Anonymous caller does not have storage.objects.get access"),
        "{r}"
    );
    assert!(
        r.hint().contains("gcloud auth application-default login"),
        "{}",
        r.hint()
    );
    assert!(
        r.hint().contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{}",
        r.hint()
    );
}

#[test]
fn gcloud_login_found_through_cloudsdk_config_is_the_one_used() {
    let s = stand();
    let adc = s.write_json(
        "gcloud-config/application_default_credentials.json",
        &s.alice_login(),
    );
    // Another login below HOME that must not be used.
    s.write_json(
        "home/.config/gcloud/application_default_credentials.json",
        &serde_json::json!({"type": "authorized_user", "client_id": "x", "client_secret": "y",
            "refresh_token": "not-known-to-the-gate", "token_uri": s.gate.token_uri()}),
    );
    let env = GcsAuthEnv {
        cloudsdk_config: Some(s.dir.path().join("gcloud-config")),
        ..s.env()
    };
    let (source, credentials) = s.source(&env, None, &[PRIVATE]);
    match &credentials {
        GcsCredentials::File {
            path, origin, kind, ..
        } => {
            assert_eq!(path, &adc);
            assert_eq!(*origin, CredentialsOrigin::Gcloud);
            assert_eq!(*kind, CredentialsKind::AuthorizedUser);
        }
        other => panic!("expected gcloud's file, got {other:?}"),
    }
    assert_eq!(
        source.clients().describe(),
        format!(
            "GCS credentials: authorized user {} (gcloud application-default credentials)",
            adc.display()
        )
    );
    assert_eq!(s.fetch(&source, PRIVATE).unwrap(), s.bytes);
    assert_eq!(s.served_principals(), vec![Some(ALICE.to_string())]);
    // The secret never shows in what the user sees.
    assert!(!format!("{credentials:?}").contains("client-secret-1"));
    assert!(!source.clients().describe().contains("refresh-alice"));
}

#[test]
fn a_service_account_key_in_google_application_credentials_signs_its_own_tokens() {
    let s = stand();
    s.gate.trust_service_account(KEY_SA);
    let key = s.write_json("keys/sa.json", &GcsAuthGate::service_account_key(KEY_SA));
    let env = GcsAuthEnv {
        google_application_credentials: Some(key.clone()),
        ..s.env()
    };
    let (source, _) = s.source(&env, None, &[PRIVATE]);
    assert_eq!(
        source.clients().describe(),
        format!(
            "GCS credentials: service-account key {} (GOOGLE_APPLICATION_CREDENTIALS) as {KEY_SA}",
            key.display()
        )
    );
    assert_eq!(s.fetch(&source, PRIVATE).unwrap(), s.bytes);
    assert_eq!(s.served_principals(), vec![Some(KEY_SA.to_string())]);
}

#[test]
fn an_impersonated_service_account_file_mints_the_target_s_tokens() {
    let s = stand();
    let source_login = s.alice_login();
    s.gate.allow_impersonation(ALICE, READER_SA);
    let file = s.write_json(
        "impersonated.json",
        &serde_json::json!({
            "type": "impersonated_service_account",
            "service_account_impersonation_url": s.gate.impersonation_url(READER_SA),
            "source_credentials": source_login,
            "delegates": [],
        }),
    );
    let env = GcsAuthEnv {
        google_application_credentials: Some(file.clone()),
        ..s.env()
    };
    let (source, credentials) = s.source(&env, None, &[PRIVATE]);
    assert!(
        credentials
            .label()
            .ends_with(&format!("(GOOGLE_APPLICATION_CREDENTIALS) as {READER_SA}")),
        "{}",
        credentials.label()
    );
    assert_eq!(s.fetch(&source, PRIVATE).unwrap(), s.bytes);
    assert_eq!(s.served_principals(), vec![Some(READER_SA.to_string())]);
}

#[test]
fn a_workload_identity_federation_file_exchanges_its_subject_token() {
    let s = stand();
    let subject = s.dir.path().join("oidc-token.jwt");
    std::fs::write(&subject, "eyJ.subject-token-of-the-ci-runner.sig").unwrap();
    s.gate
        .add_subject_token("eyJ.subject-token-of-the-ci-runner.sig", WORKLOAD);
    let file = s.write_json(
        "wif.json",
        &serde_json::json!({
            "type": "external_account",
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/ci/providers/github",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": s.gate.sts_url(),
            "credential_source": {"file": subject},
        }),
    );
    let env = GcsAuthEnv {
        google_application_credentials: Some(file),
        ..s.env()
    };
    let (source, credentials) = s.source(&env, None, &[PRIVATE]);
    assert!(
        credentials
            .label()
            .starts_with("workload identity federation (external_account)"),
        "{}",
        credentials.label()
    );
    assert_eq!(s.fetch(&source, PRIVATE).unwrap(), s.bytes);
    assert_eq!(s.served_principals(), vec![Some(WORKLOAD.to_string())]);
}

#[test]
fn a_credentials_file_of_an_unsupported_type_is_refused_by_its_type() {
    let s = stand();
    for (type_, must) in [
        ("gdch_service_account", "Google Distributed Cloud Hosted"),
        ("signed_by_a_fortune_cookie", "supported: service_account"),
    ] {
        let file = s.write_json(
            &format!("{type_}.json"),
            &serde_json::json!({"type": type_}),
        );
        let env = GcsAuthEnv {
            google_application_credentials: Some(file.clone()),
            ..s.env()
        };
        let e = s.rt.block_on(GcsCredentials::detect(&env)).unwrap_err();
        assert!(e.contains(&format!("`{type_}`")), "{e}");
        assert!(e.contains(must), "{e}");
        assert!(e.contains("gcloud auth application-default login"), "{e}");
        assert!(e.contains(&file.display().to_string()), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
    // A file the variable names that is missing is refused, not skipped.
    let env = GcsAuthEnv {
        google_application_credentials: Some(s.dir.path().join("missing.json")),
        ..s.env()
    };
    let e = s.rt.block_on(GcsCredentials::detect(&env)).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "GOOGLE_APPLICATION_CREDENTIALS names {}, which cannot be read",
            s.dir.path().join("missing.json").display()
        )),
        "{e}"
    );
}

#[test]
fn requester_pays_needs_a_user_project_from_the_config_the_environment_or_the_file() {
    let s = stand();
    let adc = s.write_json("cfg/application_default_credentials.json", &s.alice_login());
    let env = GcsAuthEnv {
        cloudsdk_config: Some(adc.parent().unwrap().to_path_buf()),
        ..s.env()
    };
    // None given: GCS's 400 UserProjectMissing, told apart.
    let (source, _) = s.source(&env, None, &[PAYER]);
    let r = refusal(s.fetch(&source, PAYER).unwrap_err());
    assert_eq!(r.kind, RefusalKind::UserProjectMissing);
    assert_eq!(r.status, Some(400));
    assert_eq!(r.code.as_deref(), Some("UserProjectMissing"));
    let line = r.to_string();
    assert!(
        line.contains("requester-pays bucket and no user project was given"),
        "{line}"
    );
    assert!(line.contains("authorized user"), "{line}");
    assert!(
        r.hint().contains("sources.gcs.user_project"),
        "{}",
        r.hint()
    );
    assert!(
        r.hint().contains("GOOGLE_CLOUD_QUOTA_PROJECT"),
        "{}",
        r.hint()
    );

    // From the config: sent as x-goog-user-project on every request.
    let (source, _) = s.source(&env, Some(BILLING), &[PAYER]);
    assert!(
        source
            .clients()
            .describe()
            .ends_with(&format!("; user project {BILLING} (x-goog-user-project)"))
    );
    assert_eq!(s.fetch(&source, PAYER).unwrap(), s.bytes);
    let last = s.gate.requests().pop().unwrap();
    assert_eq!(
        (last.admitted, last.user_project.as_deref()),
        (true, Some(BILLING))
    );

    // GOOGLE_CLOUD_QUOTA_PROJECT wins over the config; a project alice may not bill is
    // refused with its own message.
    let env_q = GcsAuthEnv {
        quota_project: Some("someone-elses-project".into()),
        ..env.clone()
    };
    let (source, _) = s.source(&env_q, Some(BILLING), &[PAYER]);
    let r = refusal(s.fetch(&source, PAYER).unwrap_err());
    assert_eq!(r.kind, RefusalKind::UserProjectRefused);
    assert_eq!(r.user_project.as_deref(), Some("someone-elses-project"));
    assert!(r.message.contains("serviceusage.services.use"), "{r}");
    assert!(
        r.hint().contains("serviceusage.services.use"),
        "{}",
        r.hint()
    );

    // The credentials file's quota_project_id when nothing else names one.
    let mut login = s.alice_login();
    login["quota_project_id"] = BILLING.into();
    s.write_json("cfg/application_default_credentials.json", &login);
    let (source, _) = s.source(&env, None, &[PAYER]);
    assert_eq!(s.fetch(&source, PAYER).unwrap(), s.bytes);
    assert_eq!(
        s.gate.requests().pop().unwrap().user_project.as_deref(),
        Some(BILLING)
    );
}

#[test]
fn a_token_gcs_no_longer_accepts_is_a_401_with_its_own_message() {
    let s = stand();
    let adc = s.write_json("cfg/application_default_credentials.json", &s.alice_login());
    let env = GcsAuthEnv {
        cloudsdk_config: Some(adc.parent().unwrap().to_path_buf()),
        ..s.env()
    };
    let (source, _) = s.source(&env, None, &[PRIVATE]);
    assert_eq!(s.fetch(&source, PRIVATE).unwrap(), s.bytes);
    // The token the client holds is revoked: GCS answers 401.
    s.gate.revoke_access_tokens();
    let r = refusal(s.fetch(&source, PRIVATE).unwrap_err());
    assert_eq!(r.kind, RefusalKind::Unauthenticated);
    assert_eq!(r.status, Some(401));
    let line = r.to_string();
    assert!(line.starts_with(&format!("bucket `{PRIVATE}`: GCS did not accept the credentials (HTTP 401 AuthenticationRequired")), "{line}");
    assert!(line.contains(&adc.display().to_string()), "{line}");
    assert!(
        r.hint().contains("gcloud auth application-default login"),
        "{}",
        r.hint()
    );
    // The login itself revoked: no token at all, told apart from a connectivity fault.
    s.gate.revoke_refresh_tokens();
    let (source, _) = s.source(&env, None, &[PRIVATE]);
    let e = s.fetch(&source, PRIVATE).unwrap_err();
    let hint = e.hint().to_string();
    let r = refusal(e);
    assert_eq!(r.kind, RefusalKind::NoToken);
    assert!(
        r.message
            .contains("could not get an access token from authorized user"),
        "{r}"
    );
    assert!(r.message.contains("invalid_grant"), "{r}");
    assert!(!hint.contains("connectivity"), "{hint}");
}

#[test]
fn a_principal_without_access_gets_a_403_naming_it_and_the_role_to_grant() {
    let s = stand();
    s.gate
        .set_metadata_account("stranger@other.iam.gserviceaccount.com");
    let env = GcsAuthEnv {
        gce_metadata_host: Some(s.gate.metadata_host()),
        ..s.env()
    };
    let (source, _) = s.source(&env, None, &[PRIVATE]);
    let e = s.fetch(&source, PRIVATE).unwrap_err();
    let text = e.to_string();
    let hint = e.hint().to_string();
    let r = refusal(e);
    assert_eq!(
        (r.kind, r.status),
        (RefusalKind::PermissionDenied, Some(403))
    );
    assert!(!r.anonymous);
    assert!(
        text.starts_with(&format!("gs://{PRIVATE}/{OBJECT}#")),
        "{text}"
    );
    assert!(
        text.contains(
            "stranger@other.iam.gserviceaccount.com does not have storage.objects.get access"
        ),
        "{text}"
    );
    assert!(
        text.contains("credentials: the metadata server at http://"),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
    assert!(hint.contains("roles/storage.objectViewer"), "{hint}");
    assert!(hint.contains(&format!("gs://{PRIVATE}")), "{hint}");
}

#[test]
fn a_missing_bucket_and_a_silent_token_source_each_have_their_own_message() {
    let s = stand();
    // The metadata server answers the probe but has no service account to give tokens for.
    let env = GcsAuthEnv {
        gce_metadata_host: Some(s.gate.metadata_host()),
        ..s.env()
    };
    let (source, _) = s.source(&env, None, &[PRIVATE]);
    let e = s.fetch(&source, PRIVATE).unwrap_err();
    let hint = e.hint().to_string();
    let r = refusal(e);
    assert_eq!(r.kind, RefusalKind::NoToken);
    assert!(
        r.message
            .starts_with("could not get an access token from the metadata server at http://"),
        "{r}"
    );
    assert!(hint.contains("service account"), "{hint}");
    // A bucket GCS does not have.
    s.gate.set_metadata_account(VM);
    let (source, _) = s.source(&env, None, &["lab-no-such-bucket"]);
    let e = s.fetch(&source, "lab-no-such-bucket").unwrap_err();
    let hint = e.hint().to_string();
    let r = refusal(e);
    assert_eq!((r.kind, r.status), (RefusalKind::NoSuchBucket, Some(404)));
    assert!(r.to_string().contains("the bucket does not exist"), "{r}");
    assert!(hint.contains("gcs_bucket"), "{hint}");
}

#[test]
fn pin_lists_with_the_chain_s_credentials_and_reports_a_refusal_with_its_hint() {
    use ingest::pin::{GcsPrefix, PinError, PinRequest, PinSettings, pin};
    let s = stand();
    s.gate.set_metadata_account(VM);
    let settings = || PinSettings {
        gcs_service_url: Some(s.gate.url()),
        gcs_auth: GcsAuthEnv {
            gce_metadata_host: Some(s.gate.metadata_host()),
            ..s.env()
        },
        retries: 1,
        timeout: Duration::from_secs(10),
        initial_backoff: Duration::from_millis(5),
        ..PinSettings::from_env(&ingest::EnvOverrides::default())
    };
    let request = |bucket: &str| PinRequest {
        gcs: Some(
            format!("gs://{bucket}/archives")
                .parse::<GcsPrefix>()
                .unwrap(),
        ),
        hf: None,
        rules: vec![],
        filter: Default::default(),
    };
    let report = pin(&request(PRIVATE), &settings()).unwrap();
    let g = report.gcs.as_ref().unwrap();
    assert_eq!(g.objects, 1);
    assert_eq!(
        g.credentials,
        format!(
            "GCS credentials: the metadata server at http://{}",
            s.gate.metadata_host()
        )
    );
    assert!(
        s.served_principals()
            .iter()
            .all(|p| p.as_deref() == Some(VM))
    );
    // A bucket the VM's account may not list: the refusal names it, with the hint.
    s.gate
        .add_bucket("lab-other-team", &["bob@example.com"], false);
    let e = pin(&request("lab-other-team"), &settings()).unwrap_err();
    assert!(matches!(e, PinError::Gcs { .. }), "{e}");
    let text = e.to_string();
    // The listing goes through the JSON API, whose error reason is `forbidden`.
    assert!(text.starts_with("gs://lab-other-team/archives: bucket `lab-other-team`: access denied (HTTP 403 forbidden"), "{text}");
    assert!(
        text.contains(&format!("{VM} does not have storage.objects.list access")),
        "{text}"
    );
    assert!(
        text.contains("(hint: grant the principal of the metadata server"),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
}
