//! The state every route shares.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use axum::extract::State;
use clockflake::PublicIds;

use crate::supervisor::Supervisor;
use crate::telemetry::Telemetry;

/// What the handlers share: the lease's supervisor, the public-id codec and token, the batch
/// limit, the metrics and the count of ids served.
pub struct App {
    pub supervisor: Arc<Supervisor>,
    pub public_ids: Option<PublicIds>,
    /// The bearer token `/v1/public/*` require, if one was given.
    pub public_token: Option<String>,
    pub max_count: u64,
    pub telemetry: Telemetry,
    pub ids_issued: AtomicU64,
}

impl App {
    /// An app serving ids from `supervisor`'s generator in batches of at most
    /// `max_count`, the public-id routes with `public_ids` (behind `public_token` when there is
    /// one), and request metrics into `telemetry`. [`crate::run`] builds one from the flags;
    /// in-process tests build theirs on a lease they took, then call [`super::router`].
    pub fn new(
        supervisor: Arc<Supervisor>,
        public_ids: Option<PublicIds>,
        public_token: Option<String>,
        max_count: u64,
        telemetry: Telemetry,
    ) -> App {
        App {
            supervisor,
            public_ids,
            public_token,
            max_count,
            telemetry,
            ids_issued: AtomicU64::new(0),
        }
    }
}

/// The extractor of the shared state, as the handlers take it.
pub(super) type Shared = State<Arc<App>>;
