//! Test infrastructure of the ingest stage, real where it can be: the real fake-gcs-server
//! ([`fake_gcs`]), a local Hub that speaks the resolve protocol and the listing API
//! ([`hub`]), both serving a demo corpus ([`demo_sources`], and the `demo-sources` binary of
//! docs/WALKTHROUGH.md), a fault-injecting HTTP proxy ([`proxy`]), a strict stand-in for GCS's
//! authorization with its token issuers ([`gcs_auth`]), writers of manifests and
//! `pipeline.yaml` files ([`fixture`]), where the external tools are ([`tools`]) and the
//! checks every archive source must pass ([`conformance`]). A dev-dependency of the crates
//! whose tests use it; nothing here is compiled into the product.

pub mod conformance;
pub mod demo_sources;
pub mod fake_gcs;
pub mod fixture;
pub mod gcs_auth;
pub mod http;
pub mod hub;
pub mod proxy;
pub mod tools;

pub use demo_sources::{DemoSources, DemoSourcesOptions};
pub use fake_gcs::{FakeGcsServer, PublishedObject, locate_fake_gcs_server};
pub use fixture::{SourcesSpec, manifest_row, write_pipeline};
pub use gcs_auth::{GateRequest, GcsAuthGate, IssuerRequest};
pub use hub::{HubFaults, HubRateLimit, HubRequest, HubRole, HubServer, ResolveChange};
pub use proxy::{FaultProxy, ProxiedRequest, ProxyFaults};
pub use tools::{python, require_python_modules};

/// A test server or fixture could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// A required tool is not installed.
    #[error("{0}")]
    Missing(String),
    /// An OS-level failure.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// An HTTP exchange with a test server failed.
    #[error("{0}")]
    Http(String),
    /// A config or manifest could not be written.
    #[error("{0}")]
    Fixture(String),
}
