//! The server's router in the test's own process: the app built from the same flags the binary
//! takes, on a `file://` lease in a temp dir (taken before the first request), called with
//! `tower::ServiceExt::oneshot` as axum's own examples test (no socket, no child process).

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use clap::Parser;
use clockflake_server::api::{router, App};
use clockflake_server::config::{self, Config};
use clockflake_server::telemetry::Telemetry;
use clockflake_test_support::TempDir;
use tower::ServiceExt;

use super::Reply;

/// The metrics recorder is process-wide: installed once, shared by every app of this process.
fn telemetry() -> Telemetry {
    static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();
    TELEMETRY
        .get_or_init(|| Telemetry::install().unwrap())
        .clone()
}

/// One app and its router; the lease's directory is removed when it is dropped.
pub struct Service {
    pub router: Router,
    /// Dropped after the router (fields drop in order), so after the lease.
    _dir: TempDir,
}

/// The public-id settings the binary reads from the environment (never from flags).
#[derive(Clone, Copy, Default)]
pub struct PublicSettings<'a> {
    /// `CLOCKFLAKE_PUBLIC_KEY`: `VERSION:HEX` entries, the current key first.
    pub keys: Option<&'a str>,
    /// `CLOCKFLAKE_PUBLIC_TOKEN`.
    pub token: Option<&'a str>,
}

impl Service {
    /// The app for `args` (the binary's flags after `--lease`) and `public`, with its lease
    /// taken in `name`'s temp dir.
    pub async fn start(name: &str, args: &[&str], public: PublicSettings<'_>) -> Service {
        let dir = TempDir::new(name);
        let lease = format!("file://{}?app=router", dir.display());
        let config = Config::try_parse_from(
            ["clockflake-server", "--lease", lease.as_str()]
                .into_iter()
                .chain(args.iter().copied()),
        )
        .unwrap();
        let supervisor = Arc::new(clockflake_server::supervisor_for(&config).unwrap());
        let leasing = Arc::clone(&supervisor);
        tokio::task::spawn_blocking(move || leasing.lease_blocking())
            .await
            .unwrap()
            .unwrap();
        let app = Arc::new(App::new(
            supervisor,
            public.keys.map(|keys| config::parse_keys(keys).unwrap()),
            public.token.map(str::to_owned),
            config.max_count,
            telemetry(),
        ));
        Service {
            router: router(app, config.bench_constant_route),
            _dir: dir,
        }
    }

    /// The lock file of `worker_id` in the lease's directory (app `router`).
    pub fn lock_file(&self, worker_id: u64) -> std::path::PathBuf {
        self._dir
            .join("router")
            .join(format!("worker-{worker_id}.lock"))
    }

    /// `request`'s response, read whole.
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        Reply {
            status,
            headers,
            body: String::from_utf8(body.to_vec()).unwrap(),
        }
    }

    /// `method path` with these headers and body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        headers: &[(header::HeaderName, &str)],
        body: impl Into<Body>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        self.send(request.body(body.into()).unwrap()).await
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, &[], Body::empty()).await
    }

    /// Asserts that `GET` of each of `paths` answers the error `code` with `status`.
    pub async fn assert_get_errors(
        &self,
        paths: impl IntoIterator<Item = String>,
        status: u16,
        code: &str,
    ) {
        for path in paths {
            let reply = self.get(&path).await;
            assert_eq!(reply.status, status, "GET {path}: {}", reply.body);
            reply.assert_error(status, code);
        }
    }

    /// `GET path` with `Accept: accept`.
    pub async fn get_accepting(&self, path: &str, accept: &str) -> Reply {
        self.call(
            Method::GET,
            path,
            &[(header::ACCEPT, accept)],
            Body::empty(),
        )
        .await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: impl Into<Body>) -> Reply {
        let json = [(header::CONTENT_TYPE, "application/json")];
        self.call(Method::POST, path, &json, body).await
    }
}
