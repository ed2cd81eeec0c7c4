//! Worker ids that never collide: leased, recycled and safe, for [`clockflake`] generators.
//!
//! [`open`] takes a worker id from a coordinator and returns a [`LeasedGenerator`]:
//!
//! | URI | coordinator |
//! |---|---|
//! | `file:///var/lib/app/ids?app=orders` | embedded, one host: a lock file per worker id, state files beside them |
//! | `postgres://user@db:5432/ids?app=orders&ttl=10s` | many hosts: one row per worker id, row leases with a fencing epoch |
//! | `k8s:///var/lib/ids?app=orders` | a StatefulSet pod's ordinal, state on its volume as `file://` keeps it ([`fixed`]) |
//! | `env:///var/lib/ids?app=orders` | the hand-assigned `CLOCKFLAKE_WORKER_ID`, state as `file://` keeps it ([`fixed`]) |
//! | `redis://:password@cache:6379/0?app=orders&ttl=10s` | many hosts: a never-expiring hash per worker id (epoch, state record) and a lease key with `PX` on the server's clock, granted and renewed by Lua scripts ([`RedisCoordinator`]; `rediss://` for TLS) |
//! | `etcd://e1:2379,e2:2379,e3:2379/?app=orders&ttl=10s` | many hosts: a `workers/ID` key per held worker id bound to an etcd lease with the TTL, a `state/ID` key with its record, written only while the worker key is the one granted ([`EtcdCoordinator`]; `etcds://` for TLS) |
//! | `zookeeper://zk1:2181,zk2:2181/snowflake/orders?ttl=10s` | many hosts: persistent `servers/<ip:port>_<worker>` nodes keep a server's worker id, ephemeral `instances/<worker>` nodes mark it in use ([`ZooKeeperCoordinator`]) |
//!
//! Parameters: `app` (namespace, default `default`); `file://`: `reserve` (how far ahead the
//! state is persisted, default `1s`) and `mode` (`private`, the default: directories 0700 and
//! files 0600, a pool directory writable by others refused; `group`: 0770/0660 for a shared
//! group); `postgres://`: `ttl` (default `10s`), `table` (default `clockflake_leases`),
//! `sslmode` (`disable`, `prefer` (default), `require`, `verify-ca`, `verify-full`, as libpq,
//! over rustls) and `sslrootcert`, and any other connection parameter of the `postgres` crate;
//! `redis://`: `ttl` (default `10s`) and, for `rediss://`, `cacert` (a PEM file to trust
//! instead of the system's roots); `postgres://`, `zookeeper://` and `redis://`: `max_skew`
//! (the start-up clock check, default `5s`, `off`); `zookeeper://`: `ttl`, `server`, `port`,
//! `cache`, `takeover` (`on`, `off`: worker ids bound to their server identity) and `offline`
//! (`cache`: start from the cache file when ZooKeeper is down, see [`ZooKeeperCoordinator`]);
//! `k8s://` and `env://`: `app`, `reserve`, `mode` as `file://`.
//!
//! Cargo features: one per coordinator with a client to build, all on by default (`open`
//! picks the coordinator from a URI at run time, from configuration). A build that needs
//! fewer says `default-features = false, features = ["postgres"]`; a URI whose feature is
//! left out is refused with `INVALID_URI` naming the feature.
//!
//! | feature | URIs | dependencies |
//! |---|---|---|
//! | (always) | `file://`, `env://` | none beyond `url` |
//! | `postgres` | `postgres://`, `postgresql://` | `postgres`, `tokio-postgres-rustls`, `rustls` |
//! | `zookeeper` | `zookeeper://` | `zookeeper-client`, `tokio` |
//! | `redis` | `redis://`, `rediss://` | `redis`, `rustls` |
//! | `k8s` | `k8s://` | none |
//! | `etcd` | `etcd://`, `etcds://` | `etcd-client` (tonic; its build needs `protoc`), `tokio` |
//!
//! ```no_run
//! use clockflake::Layout;
//! use clockflake_lease::{open, LeaseOptions};
//! let gen = open("file:///var/lib/app/ids?app=orders", Layout::CLOCKSEQ, LeaseOptions::default())?;
//! let id = gen.next_id()?;
//! println!("worker {} issued {id}", gen.worker_id());
//! gen.close()?;
//! # Ok::<(), clockflake_lease::LeaseError>(())
//! ```
#![deny(unsafe_code)] // allowed in `fork` (mmap, pthread_atfork) and Windows' `private_fs` only
#![deny(missing_docs)]

mod clock;
mod coordinator;
mod error;
#[cfg(feature = "etcd")]
mod etcd;
mod file;
pub mod fixed;
pub mod fork;
mod generator;
mod healing;
#[doc(hidden)]
pub mod holder;
pub mod limits;
mod per_process;
#[cfg(feature = "postgres")]
mod postgres;
mod private_fs;
#[doc(hidden)]
pub mod protocol;
mod record;
#[cfg(feature = "redis")]
mod redis;
mod secrets;
mod start;
mod sync;
mod uri;
#[cfg(feature = "zookeeper")]
mod zookeeper;

pub use clock::{boot_ms, wall_ms};
pub use coordinator::{Coordinator, Grant, WorkerRange};
pub use error::LeaseError;
#[cfg(feature = "etcd")]
pub use etcd::EtcdCoordinator;
pub use file::FileCoordinator;
pub use generator::{
    LeaseCounters, LeaseOptions, LeaseStats, LeasedGenerator, TickGrant, CLOSE_WAIT,
    FOLLOW_BACK_MS, RENEWAL_WAIT,
};
pub use healing::{HealEvent, HealStats, HealingGenerator, LeaseGrant};
pub use holder::{FIRST_BACKOFF, MAX_BACKOFF};
pub use per_process::{Direct, Host, PerProcess};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresCoordinator, SCHEMA};
#[cfg(feature = "redis")]
pub use redis::RedisCoordinator;
pub use start::start_lease;
pub use uri::{parse_duration, redact, DEFAULT_APP, DEFAULT_RESERVE, DEFAULT_TABLE, DEFAULT_TTL};
#[cfg(feature = "zookeeper")]
pub use zookeeper::{ZooKeeperCoordinator, DEFAULT_SESSION_TIMEOUT};

/// The most worker ids a layout may have to be leased (16 worker bits, like `sonyflake`):
/// coordinators keep one lock file or row per worker id.
pub const MAX_LEASED_WORKERS: u64 = 1 << 16;

/// Leases a worker id from the coordinator `uri` names and starts a generator under it.
///
/// Fails with `INVALID_URI`, `COORDINATOR_UNAVAILABLE`, `WORKER_POOL_EXHAUSTED` (every worker
/// id of the layout is held), `INVALID_STATE` (a stored record that is corrupt or from
/// another layout), or a core error.
pub fn open(
    uri: &str,
    layout: clockflake::Layout,
    options: LeaseOptions,
) -> Result<LeasedGenerator, LeaseError> {
    let target = uri::connect(uri)?;
    LeasedGenerator::start(target.coordinator, layout, options, target.reserve)
}

/// The coordinator `uri` names, connected but holding no lease yet, and how far ahead of the
/// clock its state record is reserved (`reserve` for `file://`, the TTL for the others).
///
/// For a program that drives the lease itself ([`holder::Holder`]) instead of through
/// [`open`]: PostgreSQL's background worker in the `clockflake` extension. Fails as [`open`]
/// does before it leases: `INVALID_URI` (the message never shows a secret) or
/// `COORDINATOR_UNAVAILABLE`.
pub fn connect(uri: &str) -> Result<(Box<dyn Coordinator>, std::time::Duration), LeaseError> {
    let target = uri::connect(uri)?;
    Ok((target.coordinator, target.reserve))
}

// Every Rust example of the README (core and leases) runs as a doctest here, the one crate
// that sees both `clockflake` and `clockflake_lease`, so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
