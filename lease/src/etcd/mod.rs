//! The etcd coordinator: `etcd://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/[PREFIX]?app=NAME&ttl=10s`
//! (and `etcds://` for TLS).
//!
//! Two keys per worker id, under `PREFIX/APP/` (`/clockflake/APP/` by default):
//!
//! - `workers/<w>`: the worker id is held. Created in a transaction that succeeds only if the
//!   key does not exist (`create_revision == 0`), attached to an etcd lease granted with the
//!   TTL (rounded up to whole seconds, etcd's unit); its value names the holder (host and
//!   process), for people. etcd deletes it when the lease expires or is revoked.
//! - `state/<w>`: the state record ([`crate::record`]'s text form with its checksum), never
//!   expiring; `""` from the first grant until a record is stored.
//!
//! Grant: one etcd lease (`LeaseGrant`), then one `Range` of both prefixes (the held worker
//! ids and every record, one revision), then the free worker ids tried in the order
//! `coordinator::preference_order` gives (usable records first), each with the transaction
//! `if create_revision(workers/<w>) == 0 then put workers/<w> (with the lease), get
//! state/<w>, and put state/<w> = "" if it does not exist`. The transaction's revision is the
//! worker key's `create_revision`: it names this grant.
//!
//! Renewal: one `LeaseKeepAlive` round (a TTL of 0 back: the lease is gone, `LEASE_LOST`), then
//! the record written in a transaction `if create_revision(workers/<w>) == REV and
//! lease(workers/<w>) == LEASE and mod_revision(state/<w>) == the revision this holder last
//! wrote then put state/<w>`: a holder whose lease expired (its key deleted, perhaps created
//! again by a newcomer, with a later revision) cannot write (fencing), and a renewal that
//! reaches the server after a newer one (sent again after a timeout) never lowers the stored
//! marks. Release: the record written the same way, then the lease revoked (which deletes
//! the worker key).
//!
//! The lease expires on the cluster's clock: the leader counts the TTL from when it received
//! the grant or the keep-alive, and a newly elected leader gives every lease its full TTL
//! again, so a lease ends no sooner than the TTL after the request was sent, which is when the
//! holder's deadline starts. Every request is bounded by half the TTL (each endpoint given an
//! equal share before the next is tried); see docs/DESIGN.md for the assumptions.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use clockflake::{Layout, State};
use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};

use crate::coordinator::{
    check_ranges, exhausted, pool, preference_order, ready_at_ms, Grant, WorkerRange,
};
use crate::{Coordinator, LeaseError};

mod client;
pub(crate) mod uri;

use client::{lease_gone, Endpoints};

/// The prefix of the keys when the URI's path names none.
pub(crate) const DEFAULT_PREFIX: &str = "/clockflake";

/// A `state/<w>` value as read: `None` when there is no such key.
type Record = Option<Vec<u8>>;

/// How many times the free worker ids are listed again when others took every candidate.
const LISTINGS: usize = 3;

/// What an `etcd://` URI asks for.
pub(crate) struct Settings {
    pub endpoints: Vec<String>,
    pub user: Option<(String, String)>,
    pub cacert: Option<Vec<u8>>,
    pub tls: bool,
    pub prefix: String,
    pub app: String,
    pub ttl: Duration,
    pub max_skew: Option<Duration>,
    /// The URI's `workers` range (`None`: every worker id of the layout).
    pub workers: Option<WorkerRange>,
    pub redacted_uri: String,
}

/// The lease held: the worker id, the etcd lease, and the worker key's `create_revision`.
#[derive(Clone, Copy, Debug)]
struct Held {
    worker_id: u64,
    lease: i64,
    revision: i64,
    /// The `mod_revision` of `state/<w>` as this holder last wrote (or, at the grant, read)
    /// it: a record write expects it, so a renewal that reaches the server after a newer one
    /// (sent again after a timeout) never lowers the stored marks.
    state_revision: i64,
}

/// A worker key just created: its revision, the record as it was, and the record's revision.
struct Taken {
    revision: i64,
    record: Record,
    state_revision: i64,
}

/// Worker ids from keys bound to etcd leases ([`crate::open`] with `etcd://` or `etcds://`).
pub struct EtcdCoordinator {
    endpoints: Endpoints,
    tls: bool,
    /// `PREFIX/APP/`
    root: String,
    owner: String,
    ttl: Duration,
    max_skew: Option<Duration>,
    /// The URI's `workers` range, also written into the worker key's value
    /// (`HOST pid PID workers=LO-HI`), where other pools read it to refuse a range that
    /// overlaps theirs (`WORKER_RANGE_CONFLICT`).
    workers: Option<WorkerRange>,
    redacted_uri: String,
    /// The password as written and percent-encoded, scrubbed from every error's text.
    secrets: Vec<String>,
    held: Option<Held>,
}

impl std::fmt::Debug for EtcdCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCoordinator")
            .field("coordinator", &self.redacted_uri)
            .field("owner", &self.owner)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl EtcdCoordinator {
    pub(crate) fn new(settings: Settings) -> EtcdCoordinator {
        let secrets = settings
            .user
            .as_ref()
            .map(|(_, password)| crate::secrets::password_forms(password.as_bytes()))
            .unwrap_or_default();
        let endpoints = Endpoints::new(
            settings.endpoints,
            settings.user,
            settings.tls,
            settings.cacert.as_deref(),
        );
        EtcdCoordinator {
            endpoints,
            tls: settings.tls,
            root: format!("{}/{}/", settings.prefix, settings.app),
            owner: match settings.workers {
                Some(range) => format!("{} workers={range}", owner()),
                None => owner(),
            },
            ttl: settings.ttl,
            max_skew: settings.max_skew,
            workers: settings.workers,
            redacted_uri: settings.redacted_uri,
            secrets,
            held: None,
        }
    }

    /// The keys' prefix for this application, `PREFIX/APP/`.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The worker id held and its etcd lease (for tests and diagnostics).
    pub fn lease(&self) -> Option<(u64, i64)> {
        self.held.map(|held| (held.worker_id, held.lease))
    }

    fn worker_key(&self, worker_id: u64) -> String {
        format!("{}workers/{worker_id}", self.root)
    }

    fn state_key(&self, worker_id: u64) -> String {
        format!("{}state/{worker_id}", self.root)
    }

    /// Every request is bounded by half the TTL, so a member that stopped answering cannot
    /// hold a renewal past the lease.
    fn budget(&self) -> Duration {
        (self.ttl / 2).max(Duration::from_millis(100))
    }

    /// The TTL asked of etcd: whole seconds, rounded up.
    fn ttl_seconds(&self) -> i64 {
        i64::try_from(self.ttl.as_millis().div_ceil(1000)).unwrap_or(i64::MAX)
    }

    /// `COORDINATOR_UNAVAILABLE` with `error`'s text scrubbed of the password.
    fn unavailable(&self, what: &str, error: impl std::fmt::Display) -> LeaseError {
        LeaseError::unavailable(
            &self.redacted_uri,
            crate::secrets::scrub(&format!("{what}: {error}"), &self.secrets),
        )
    }

    fn call<T, F, Fut>(&mut self, what: &str, request: F) -> Result<T, LeaseError>
    where
        T: Send + 'static,
        F: Fn(etcd_client::Client) -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let budget = self.budget();
        self.endpoints
            .call(budget, request)
            .map_err(|fault| self.unavailable(what, fault))
    }

    /// The record of `state/<w>` as read (`None`: no such key).
    fn state_of(&self, worker_id: u64, value: Option<&[u8]>) -> Result<Option<State>, LeaseError> {
        let Some(text) = value.filter(|text| !text.is_empty()) else {
            // No key: never granted; "": granted, no record stored yet.
            return Ok(None);
        };
        let location = format!("{} key {}", self.redacted_uri, self.state_key(worker_id));
        let state = crate::record::decode(text)
            .map_err(|reason| LeaseError::corrupt(location.clone(), reason))?;
        if state.worker_id != worker_id {
            return Err(LeaseError::corrupt(
                location,
                format!("the record is worker id {}'s", state.worker_id),
            ));
        }
        Ok(Some(state))
    }

    /// The held worker ids (up to `max`) with the range each holder declared (`""`: none),
    /// and every stored record, read at one revision.
    #[allow(clippy::type_complexity)]
    fn list(
        &mut self,
        max: u64,
    ) -> Result<(BTreeMap<u64, String>, BTreeMap<u64, Vec<u8>>), LeaseError> {
        let (workers, states) = (
            format!("{}workers/", self.root),
            format!("{}state/", self.root),
        );
        let response = self.call("list the worker ids", move |mut client| {
            let txn = Txn::new().and_then([
                TxnOp::get(workers.clone(), Some(GetOptions::new().with_prefix())),
                TxnOp::get(states.clone(), Some(GetOptions::new().with_prefix())),
            ]);
            async move { client.txn(txn).await }
        })?;
        let mut held = BTreeMap::new();
        let mut records = BTreeMap::new();
        let responses = response.op_responses();
        let id_of = |key: &[u8], dir: &str| -> Option<u64> {
            std::str::from_utf8(key)
                .ok()?
                .strip_prefix(&format!("{}{dir}/", self.root))?
                .parse()
                .ok()
        };
        if let Some(TxnOpResponse::Get(workers)) = responses.first() {
            for kv in workers.kvs() {
                if let Some(id) = id_of(kv.key(), "workers").filter(|id| *id <= max) {
                    let value = String::from_utf8_lossy(kv.value());
                    let declared = value
                        .rsplit_once(" workers=")
                        .map_or("", |(_, range)| range);
                    held.insert(id, declared.to_owned());
                }
            }
        }
        if let Some(TxnOpResponse::Get(states)) = responses.get(1) {
            for kv in states.kvs() {
                if let Some(id) = id_of(kv.key(), "state").filter(|id| *id <= max) {
                    records.insert(id, kv.value().to_vec());
                }
            }
        }
        Ok((held, records))
    }

    /// Tries to create `workers/<w>` bound to `lease`: the grant's revision and the record
    /// as it was, or `None` when someone holds it.
    fn try_take(&mut self, worker_id: u64, lease: i64) -> Result<Option<Taken>, LeaseError> {
        let (worker, state) = (self.worker_key(worker_id), self.state_key(worker_id));
        let owner = self.owner.clone();
        let response = self.call("take a worker id", move |mut client| {
            let first_record = Txn::new()
                .when([Compare::create_revision(state.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(state.clone(), "", None)]);
            let txn = Txn::new()
                .when([Compare::create_revision(
                    worker.clone(),
                    CompareOp::Equal,
                    0,
                )])
                .and_then([
                    TxnOp::put(
                        worker.clone(),
                        owner.clone(),
                        Some(PutOptions::new().with_lease(lease)),
                    ),
                    TxnOp::get(state.clone(), None),
                    TxnOp::txn(first_record),
                ])
                .or_else([TxnOp::get(worker.clone(), None)]);
            async move { client.txn(txn).await }
        })?;
        let responses = response.op_responses();
        if response.succeeded() {
            let revision = response.header().map_or(0, |header| header.revision());
            let found = match responses.get(1) {
                Some(TxnOpResponse::Get(get)) => get
                    .kvs()
                    .first()
                    .map(|kv| (kv.value().to_vec(), kv.mod_revision())),
                _ => None,
            };
            // No record yet: the transaction wrote the empty one, at its own revision.
            let state_revision = found.as_ref().map_or(revision, |(_, at)| *at);
            return Ok(Some(Taken {
                revision,
                record: found.map(|(value, _)| value),
                state_revision,
            }));
        }
        // Taken: by someone else, or by an earlier attempt of this very request that was
        // applied though its answer was lost (the key is bound to our lease).
        let ours = match responses.first() {
            Some(TxnOpResponse::Get(get)) => get
                .kvs()
                .first()
                .filter(|kv| kv.lease() == lease)
                .map(|kv| kv.create_revision()),
            _ => None,
        };
        let Some(revision) = ours else {
            return Ok(None);
        };
        let state = self.state_key(worker_id);
        let record = self.call("read a state record", move |mut client| {
            let state = state.clone();
            async move { client.get(state, None).await }
        })?;
        let found = record.kvs().first();
        Ok(Some(Taken {
            revision,
            record: found.map(|kv| kv.value().to_vec()),
            state_revision: found.map_or(0, |kv| kv.mod_revision()),
        }))
    }

    /// Writes `record` to `state/<w>` while `held` still holds the worker key and the record
    /// is the one it last wrote: the record's new revision, or `None` when either changed.
    fn write_fenced(&mut self, held: Held, record: String) -> Result<Option<i64>, LeaseError> {
        let (worker, state) = (
            self.worker_key(held.worker_id),
            self.state_key(held.worker_id),
        );
        let expected = record.clone();
        let response = self.call("store the state record", move |mut client| {
            let txn = Txn::new()
                .when([
                    Compare::create_revision(worker.clone(), CompareOp::Equal, held.revision),
                    Compare::lease(worker.clone(), CompareOp::Equal, held.lease),
                    Compare::mod_revision(state.clone(), CompareOp::Equal, held.state_revision),
                ])
                .and_then([TxnOp::put(state.clone(), record.clone(), None)])
                .or_else([
                    TxnOp::get(worker.clone(), None),
                    TxnOp::get(state.clone(), None),
                ]);
            async move { client.txn(txn).await }
        })?;
        if response.succeeded() {
            return Ok(Some(
                response.header().map_or(0, |header| header.revision()),
            ));
        }
        // Not written: the worker key is no longer ours, or the record changed since this
        // holder wrote it. An earlier attempt of this very write, applied though its answer
        // was lost, leaves the key ours and the record as sent: that one counts.
        let responses = response.op_responses();
        let ours = matches!(responses.first(), Some(TxnOpResponse::Get(get))
        if get.kvs().first().is_some_and(|kv| {
            kv.create_revision() == held.revision && kv.lease() == held.lease
        }));
        let as_sent = match responses.get(1) {
            Some(TxnOpResponse::Get(get)) => get
                .kvs()
                .first()
                .filter(|kv| kv.value() == expected.as_bytes())
                .map(|kv| kv.mod_revision()),
            _ => None,
        };
        Ok(as_sent.filter(|_| ours))
    }

    fn revoke(&mut self, lease: i64) -> Result<(), LeaseError> {
        match self
            .endpoints
            .call(self.budget(), move |mut client| async move {
                client.lease_revoke(lease).await
            }) {
            Ok(_) => Ok(()),
            Err(fault) if lease_gone(&fault) => Ok(()),
            Err(fault) => Err(self.unavailable("revoke the lease", fault)),
        }
    }
}

impl Coordinator for EtcdCoordinator {
    fn redacted_uri(&self) -> String {
        self.redacted_uri.clone()
    }

    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        if self.held.is_some() {
            return Err(self.unavailable("acquire", "this coordinator already holds a lease"));
        }
        let range = pool(&self.redacted_uri, layout, self.workers.as_ref())?;
        let ttl_seconds = self.ttl_seconds();
        let granted = self.call("grant a lease", move |mut client| async move {
            client.lease_grant(ttl_seconds, None).await
        })?;
        let lease = granted.id();
        if granted.ttl() < ttl_seconds {
            let _ = self.revoke(lease);
            return Err(self.unavailable(
                "grant a lease",
                format!("the cluster granted {} s, less than ttl", granted.ttl()),
            ));
        }
        let result = self.take_one(layout, now_ms, &range, lease);
        if !matches!(result, Ok(Some(_))) {
            let _ = self.revoke(lease);
        }
        let (worker_id, taken) = match result? {
            Some(taken) => taken,
            None => return Err(exhausted(&self.redacted_uri, layout, self.workers.as_ref())),
        };
        self.held = Some(Held {
            worker_id,
            lease,
            revision: taken.revision,
            state_revision: taken.state_revision,
        });
        match self.state_of(worker_id, taken.record.as_deref()) {
            Ok(state) => Ok(Grant {
                worker_id,
                state,
                ttl: Some(self.ttl),
            }),
            Err(error) => {
                // A record that cannot be used: the worker id given back untouched.
                let _ = self.release(None);
                Err(error)
            }
        }
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        let Some(held) = self.held else {
            return Err(LeaseError::lost("this coordinator holds no lease"));
        };
        let lease = held.lease;
        let kept = self
            .endpoints
            .call(self.budget(), move |mut client| async move {
                client.lease_keep_alive(lease).await.map(|(_, _)| ())
            });
        match kept {
            Ok(()) => {}
            Err(fault) if lease_gone(&fault) => {
                self.held = None;
                return Err(LeaseError::lost(format!(
                    "the etcd lease of worker id {} expired (keep-alive: TTL 0)",
                    held.worker_id
                )));
            }
            Err(fault) => return Err(self.unavailable("keep the lease alive", fault)),
        }
        if let Some(written) = self.write_fenced(held, crate::record::encode(state))? {
            if let Some(held) = self.held.as_mut() {
                held.state_revision = written;
            }
            return Ok(());
        }
        self.held = None;
        Err(LeaseError::lost(format!(
            "the key of worker id {} is no longer the one granted at revision {} (lease expired \
             or taken over)",
            held.worker_id, held.revision
        )))
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        let mut result = Ok(());
        if let Some(state) = state {
            result = self
                .write_fenced(held, crate::record::encode(state))
                .map(|_| ());
        }
        let revoked = self.revoke(held.lease);
        result.and(revoked)
    }

    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        let key = self.state_key(worker_id);
        let response = self.call("read a state record", move |mut client| {
            let key = key.clone();
            async move { client.get(key, None).await }
        })?;
        let value = response.kvs().first().map(|kv| kv.value().to_vec());
        self.state_of(worker_id, value.as_deref())
    }

    /// etcd has no time API: the clock read is the `Date` header of the HTTP answer the
    /// member asked first gives to `GET /version` on its client port (Go's HTTP server
    /// writes it from the member's clock, to the second). The middle of that second is
    /// returned, so the measurement is good to half a second beyond half the round trip.
    /// Over TLS (`etcds://`) there is no check (`None`).
    fn server_time_ms(&mut self) -> Result<Option<u64>, LeaseError> {
        if self.tls {
            return Ok(None);
        }
        let authority = self.endpoints.current_authority().to_owned();
        let budget = self.budget();
        let date = http_date(&authority, budget)
            .map_err(|error| self.unavailable("clock check (GET /version)", error))?;
        Ok(Some(date * 1000 + 500))
    }

    fn max_skew(&self) -> Option<Duration> {
        if self.tls {
            return None;
        }
        self.max_skew
    }
}

/// The `Date` header (Unix seconds) of `GET /version` at `authority` (`host:port`).
fn http_date(authority: &str, limit: Duration) -> Result<u64, String> {
    let address = authority
        .to_socket_addrs()
        .map_err(|error| error.to_string())?
        .next()
        .ok_or("no address")?;
    let mut stream =
        TcpStream::connect_timeout(&address, limit).map_err(|error| error.to_string())?;
    stream
        .set_read_timeout(Some(limit))
        .and_then(|()| stream.set_write_timeout(Some(limit)))
        .map_err(|error| error.to_string())?;
    let request =
        format!("GET /version HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|error| error.to_string())?;
    let mut answer = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    let date = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("date").then(|| value.trim())
        })
        .ok_or("the answer has no Date header")?;
    parse_http_date(date).ok_or_else(|| format!("cannot read the Date header {date:?}"))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110's IMF-fixdate) as Unix seconds.
fn parse_http_date(text: &str) -> Option<u64> {
    let mut parts = text.split_whitespace().skip(1);
    let day: u64 = parts.next()?.parse().ok()?;
    let month_name = parts.next()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|name| *name == month_name)?;
    let year: i64 = parts.next()?.parse().ok()?;
    let mut clock = parts.next()?.split(':').map(|n| n.parse::<u64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let month = i64::try_from(month).ok()? + 1;
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year =
        (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + i64::try_from(day).ok()? - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + i64::try_from(hour * 3600 + minute * 60 + second).ok()?;
    u64::try_from(seconds).ok()
}

/// The worker key's value: who holds it, for people (`etcdctl get`).
fn owner() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".to_owned());
    format!("{host} pid {}", std::process::id())
}

impl EtcdCoordinator {
    /// The free worker ids tried in preference order, listed again (at most [`LISTINGS`]
    /// times) when others took every one first: the worker id taken and what its grant read,
    /// or `None` when every worker id is held.
    fn take_one(
        &mut self,
        layout: &Layout,
        now_ms: u64,
        range: &std::ops::RangeInclusive<u64>,
        lease: i64,
    ) -> Result<Option<(u64, Taken)>, LeaseError> {
        for _ in 0..LISTINGS {
            let (held, records) = self.list(layout.max_worker_id())?;
            check_ranges(
                &self.redacted_uri,
                self.workers.as_ref(),
                range,
                held.iter().map(|(id, declared)| (*id, declared.as_str())),
            )?;
            let free: Vec<u64> = range.clone().filter(|id| !held.contains_key(id)).collect();
            if free.is_empty() {
                return Ok(None);
            }
            let listed = free.into_iter().map(|worker| {
                let state = self.state_of(worker, records.get(&worker).map(Vec::as_slice));
                (worker, state)
            });
            let mut candidates = preference_order(layout, now_ms, listed);
            let mut conflicts = 0usize;
            while !candidates.is_empty() {
                // In order while nobody competes; after a conflict, a random one of the
                // candidates as good as the first, so that holders starting together do not
                // all try the same worker ids one after another.
                let at = if conflicts == 0 {
                    0
                } else {
                    let first_ready = {
                        let first = candidates[0];
                        let state = self.state_of(first, records.get(&first).map(Vec::as_slice));
                        state.map_or(0, |s| ready_at_ms(layout, s.as_ref(), now_ms))
                    };
                    let equal = candidates
                        .iter()
                        .take_while(|w| {
                            let state = self.state_of(**w, records.get(w).map(Vec::as_slice));
                            state.map_or(0, |s| ready_at_ms(layout, s.as_ref(), now_ms))
                                == first_ready
                        })
                        .count();
                    random_below(equal.max(1))
                };
                let worker = candidates.remove(at);
                if let Some(taken) = self.try_take(worker, lease)? {
                    return Ok(Some((worker, taken)));
                }
                conflicts += 1;
            }
        }
        Err(self.unavailable(
            "take a worker id",
            "other holders took every free worker id first, three listings in a row",
        ))
    }
}

/// A number below `bound` (not cryptographic: it spreads contending holders).
fn random_below(bound: usize) -> usize {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    usize::try_from(hasher.finish() % (bound as u64)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::parse_http_date;
    use crate::uri::connect;

    #[test]
    fn http_dates_are_read_as_unix_seconds() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date("Sat, 28 Nov 2026 08:35:46 GMT"),
            Some(1_795_854_946)
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT"), None);
    }

    fn refusal(uri: &str) -> String {
        match connect(uri) {
            Ok(target) => format!("OK {}", target.coordinator.redacted_uri()),
            Err(error) => format!("{} {error}", error.code()),
        }
    }

    #[test]
    fn etcd_uris_are_taken_apart_without_their_password() {
        let shown = refusal("etcd://me:s3cret@e1:2379,e2:2379/?app=orders&ttl=2s");
        assert_eq!(shown, "OK etcd://me@e1:2379,e2:2379/?app=orders");
        assert!(!shown.contains("s3cret"));
        let shown = refusal("etcds://[::1]:2379/ids/prod?app=a");
        assert_eq!(shown, "OK etcds://[::1]:2379/ids/prod?app=a");
        assert_eq!(refusal("etcd://e1"), "OK etcd://e1?app=default");
        assert_eq!(
            refusal("etcd://e1:2379/?app=a&workers=0-63"),
            "OK etcd://e1:2379/?app=a&workers=0-63"
        );
    }

    #[test]
    fn bad_etcd_uris_are_refused_with_invalid_uri() {
        for (uri, says) in [
            ("etcd://h:1/?ttl=100ms", "ttl must be between"),
            ("etcd://h:1/?ttl=bad", "ttl must look like"),
            ("etcd://h:1/?app=a/b", "app must be"),
            ("etcd://h:1/?table=t", "etcd:// takes"),
            ("etcd://h:1/?reserve=1s", "etcd:// takes"),
            ("etcd://h:1/?bogus=1", "unknown parameter \"bogus\""),
            ("etcd://h:1/?cacert=/ca.pem", "etcds://"),
            ("etcds://h:1/?cacert=/nonexistent/ca.pem", "cannot read"),
            ("etcd://h:1/..x/?app=a", "segment of the path"),
            ("etcd://me@h:1/", "needs a password"),
            ("etcd://:pw@h:1/", "needs a user name"),
            ("etcd://h:1/?max_skew=soon", "max_skew must be"),
            ("etcd:///?app=a", "at least one host"),
            ("etcd://h:1/?workers=5-2", "is empty"),
            ("etcd://h:1/?workers=a-b", "workers must look like"),
        ] {
            let shown = refusal(uri);
            assert!(shown.starts_with("INVALID_URI "), "{uri}: {shown}");
            assert!(shown.contains(says), "{uri}: {shown}");
        }
    }
}
