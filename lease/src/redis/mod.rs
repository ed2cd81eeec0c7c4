//! The Redis coordinator: `redis://[USER:PASSWORD@]HOST:PORT/DB?app=NAME&ttl=10s` (and
//! `rediss://` for TLS).
//!
//! Two keys per worker id, both under the hash tag `{app}` (one slot, one server):
//!
//! - `clockflake:{APP}:worker:ID`, a hash that never expires: `epoch` (the fencing epoch,
//!   raised by every grant) and `state` (the state record in [`crate::record`]'s text form,
//!   with its checksum; `""` once granted and before any record was stored);
//! - `clockflake:{APP}:lease:ID`, a string `EPOCH OWNER` set with `PX ttl`: the lease, which
//!   expires on the server's clock.
//!
//! Grant, renewal and release are Lua scripts, each atomic on the server: a renewal extends
//! the lease (`PEXPIRE`) and stores the record only while the lease key still reads
//! `EPOCH OWNER` and the hash's epoch is still that epoch; otherwise the lease is gone. The
//! epoch and the record live in the key that does not expire, so a lease that expired
//! leaves both behind for the next holder. A hash that was granted before (`epoch` > 0) and
//! has no `state` lost its marks: refused (`INVALID_STATE`), never read as "never used".
//!
//! Replication: Redis replicates asynchronously, and a replica promoted behind its primary
//! forgets the grants and renewals it had not received. Grants and renewals go to a primary
//! only (`ROLE`, checked before each). With `min_replicas=N` every grant and renewal is
//! followed by `WAIT N`: one that fewer than N replicas acknowledged within the patience does
//! not count (the renewal failed; the grant is refused). A primary that has replicas while
//! neither `min_replicas` nor the server's `min-replicas-to-write` guards it is refused at
//! `open` unless the URI says `replication=async` (the risk accepted).

use std::time::Duration;

use ::redis::{
    Client, Connection, ConnectionAddr, ConnectionLike, IntoConnectionInfo, RedisConnectionInfo,
};
use clockflake::{Layout, State};

use crate::coordinator::{
    check_ranges, declared_range, exhausted, owner_with_range, pool, preference_order, Coordinator,
    Grant, WorkerRange,
};
use crate::LeaseError;

pub(crate) mod uri;

/// How many free worker ids are read to find one whose record is usable at once.
const CANDIDATES: usize = 256;

/// The free worker ids (no lease key) from ARGV[4] up to ARGV[2], at most ARGV[3] of them,
/// each with its hash's epoch and record: `{id, epoch, has_state, state}`.
const LIST: &str = r"
local prefix, max, limit, first = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
for id = first, max do
  if redis.call('EXISTS', prefix .. 'lease:' .. id) == 0 then
    local rec = redis.call('HMGET', prefix .. 'worker:' .. id, 'epoch', 'state')
    out[#out + 1] = {id, tonumber(rec[1] or '0') or 0, rec[2] and 1 or 0, rec[2] or ''}
    if #out >= limit then break end
  end
end
return out
";

/// Grants the first free worker id of ARGV[6..] (the preferred order), else the lowest free
/// one from ARGV[5] up to ARGV[4]: raises its epoch, writes an empty record on its first grant, and sets
/// the lease `EPOCH OWNER` with `PX` ARGV[3]. Returns `{id, epoch, has_state, state}` (the
/// record as it was before the grant) or nil when every worker id is held.
const GRANT: &str = r"
local prefix, owner, ttl_ms, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local first = tonumber(ARGV[5])
local function take(id)
  local lease = prefix .. 'lease:' .. id
  if redis.call('EXISTS', lease) == 1 then return nil end
  local worker = prefix .. 'worker:' .. id
  local epoch = redis.call('HINCRBY', worker, 'epoch', 1)
  redis.call('HDEL', worker, 'renewal')
  local state = redis.call('HGET', worker, 'state')
  if epoch == 1 and not state then
    redis.call('HSET', worker, 'state', '')
    state = ''
  end
  redis.call('SET', lease, epoch .. ' ' .. owner, 'PX', ttl_ms)
  return {id, epoch, state and 1 or 0, state or ''}
end
for i = 6, #ARGV do
  local granted = take(tonumber(ARGV[i]))
  if granted then return granted end
end
for id = first, max do
  local granted = take(id)
  if granted then return granted end
end
return nil
";

/// The live leases (worker ids 0 to ARGV[2]) whose value declares a range (` workers=`):
/// `{id, value}`.
const DECLARED: &str = r"
local prefix, max = ARGV[1], tonumber(ARGV[2])
local out = {}
for id = 0, max do
  local value = redis.call('GET', prefix .. 'lease:' .. id)
  if value and string.find(value, ' workers=', 1, true) then
    out[#out + 1] = {id, value}
  end
end
return out
";

/// KEYS: the lease, the worker hash. ARGV: `EPOCH OWNER`, the epoch, the TTL in ms, the
/// record, the renewal's number. Extends the lease and stores the record while both still say
/// the holder is us: 1, else 0; nothing (2) for a renewal older than one already stored.
///
/// The number (one more for each renewal of a lease; the grant clears the stored one) keeps a
/// late renewal from lowering the marks: the renewal thread gives up on a renewal that does
/// not answer in time and sends the next on a new connection, and the one given up on may
/// still reach the server, and run, after it (the server frozen, or its packets late). Stored
/// as sent, its lower marks would let a later holder resume below ids issued under the newer
/// reservation.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[2], 'epoch') ~= ARGV[2] then return 0 end
local stored = tonumber(redis.call('HGET', KEYS[2], 'renewal') or '0')
if tonumber(ARGV[5]) <= stored then return 2 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[2], 'state', ARGV[4], 'renewal', ARGV[5])
return 1
";

/// KEYS: the lease, the worker hash. ARGV: `EPOCH OWNER`, the epoch, and the record to store
/// (optional). Stores it and deletes the lease while they are still ours: 1, else 0.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[2], 'epoch') ~= ARGV[2] then return 0 end
if ARGV[3] then redis.call('HSET', KEYS[2], 'state', ARGV[3]) end
redis.call('DEL', KEYS[1])
return 1
";

/// What `LIST` and `GRANT` return for one worker id: id, epoch, whether the hash has a
/// `state` field, and that field.
type Listed = (u64, i64, u8, Vec<u8>);

/// Worker ids from expiring leases in Redis.
pub struct RedisCoordinator {
    client: Client,
    redacted_uri: String,
    /// The password as written and percent-encoded, scrubbed from every error's text.
    secrets: Vec<String>,
    connection: Option<Connection>,
    /// `clockflake:{APP}:`
    prefix: String,
    owner: String,
    ttl: Duration,
    /// The worker id held, its epoch, and the lease key's value `EPOCH OWNER`.
    held: Option<(u64, i64, String)>,
    /// The number of the last renewal sent under the lease held (see `RENEW`).
    renewals: u64,
    /// The start-up clock check's bound (`max_skew`; `None`: off).
    max_skew: Option<Duration>,
    /// How the coordinator guards against a failover to a replica behind the primary.
    replication: Replication,
    /// The URI's `workers` range (`None`: every worker id of the layout).
    workers: Option<WorkerRange>,
    /// Whether the server's replication setup was checked against `replication` (at the
    /// first grant).
    replication_checked: bool,
}

/// `min_replicas=N` and `replication=async` of a `redis://` URI.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Replication {
    /// Replicas that must acknowledge (`WAIT`) a grant or renewal for it to count.
    pub min_replicas: u32,
    /// `replication=async`: a primary with unguarded replicas is accepted.
    pub accept_async: bool,
}

impl std::fmt::Debug for RedisCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCoordinator")
            .field("coordinator", &self.redacted_uri)
            .field("owner", &self.owner)
            .field(
                "held",
                &self.held.as_ref().map(|(id, epoch, _)| (id, epoch)),
            )
            .finish_non_exhaustive()
    }
}

/// Where and how to connect: what `rediss://` or `redis://` named.
pub(crate) struct Endpoint {
    pub host: String,
    pub port: u16,
    pub db: i64,
    pub user: Option<String>,
    pub password: Option<String>,
    /// `rediss://`: TLS, verified against `cacert` (PEM) or the system's roots.
    pub tls: bool,
    pub cacert: Option<Vec<u8>>,
}

impl RedisCoordinator {
    /// A coordinator for `app` on `endpoint`. Connects lazily.
    pub(crate) fn new(
        endpoint: Endpoint,
        redacted_uri: String,
        app: &str,
        ttl: Duration,
        owner: String,
    ) -> Result<RedisCoordinator, String> {
        let secrets = endpoint
            .password
            .as_deref()
            .map(|p| crate::secrets::password_forms(p.as_bytes()))
            .unwrap_or_default();
        let addr = if endpoint.tls {
            // The redis crate asks rustls for its process-wide provider: install ring's unless
            // the application installed one (then that one stays).
            let _ = rustls::crypto::ring::default_provider().install_default();
            ConnectionAddr::TcpTls {
                host: endpoint.host.clone(),
                port: endpoint.port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(endpoint.host.clone(), endpoint.port)
        };
        let mut settings = RedisConnectionInfo::default().set_db(endpoint.db);
        if let Some(user) = endpoint.user.as_deref().filter(|u| !u.is_empty()) {
            settings = settings.set_username(user);
        }
        if let Some(password) = &endpoint.password {
            settings = settings.set_password(password);
        }
        let scrub =
            |error: ::redis::RedisError| crate::secrets::scrub(&error.to_string(), &secrets);
        let info = addr
            .into_connection_info()
            .map_err(scrub)?
            .set_redis_settings(settings);
        let client = match endpoint.cacert {
            Some(root_cert) => Client::build_with_tls(
                info,
                ::redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(root_cert),
                },
            ),
            None => Client::open(info),
        }
        .map_err(scrub)?;
        Ok(RedisCoordinator {
            client,
            redacted_uri,
            secrets,
            connection: None,
            prefix: format!("clockflake:{{{app}}}:"),
            owner,
            ttl,
            held: None,
            renewals: 0,
            max_skew: Some(crate::coordinator::DEFAULT_MAX_SKEW),
            replication: Replication::default(),
            replication_checked: false,
            workers: None,
        })
    }

    /// The owner token this coordinator writes into the leases it holds.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// `COORDINATOR_UNAVAILABLE` with `error`'s text scrubbed of the password.
    fn unavailable(&self, error: impl std::fmt::Display) -> LeaseError {
        LeaseError::unavailable(
            &self.redacted_uri,
            crate::secrets::scrub(&error.to_string(), &self.secrets),
        )
    }

    /// Every wait on the server (connect, TLS, each reply) is bounded well inside the TTL,
    /// so a frozen server cannot hold a renewal past the lease.
    fn patience(&self) -> Duration {
        (self.ttl / 2).max(Duration::from_millis(100))
    }

    /// Runs `work` on a connection (connecting if there is none); any error drops the
    /// connection, whose next reply could be the late answer to this request.
    fn with_connection<T>(
        &mut self,
        work: impl FnOnce(&mut Connection) -> ::redis::RedisResult<T>,
    ) -> Result<T, LeaseError> {
        if self.connection.as_ref().is_none_or(|c| !c.is_open()) {
            self.connection = None;
            let patience = self.patience();
            let connection = self
                .client
                .get_connection_with_timeout(patience)
                .and_then(|connection| {
                    connection.set_read_timeout(Some(patience))?;
                    connection.set_write_timeout(Some(patience))?;
                    Ok(connection)
                })
                .map_err(|error| self.unavailable(error))?;
            self.connection = Some(connection);
        }
        let Some(connection) = self.connection.as_mut() else {
            return Err(self.unavailable("no connection"));
        };
        match work(connection) {
            Ok(value) => Ok(value),
            Err(error) => {
                self.connection = None;
                Err(self.unavailable(error))
            }
        }
    }

    fn keys(&self, worker_id: u64) -> (String, String) {
        (
            format!("{}lease:{worker_id}", self.prefix),
            format!("{}worker:{worker_id}", self.prefix),
        )
    }

    /// The record of a worker hash; `leased_before`: granted before the grant at hand (its
    /// first grant wrote an empty record, so a missing one means lost marks).
    fn state_of(
        &self,
        worker_id: u64,
        leased_before: bool,
        has_state: bool,
        text: &[u8],
    ) -> Result<Option<State>, LeaseError> {
        let location = format!(
            "{} key {}worker:{worker_id}",
            self.redacted_uri, self.prefix
        );
        if !has_state {
            return if leased_before {
                Err(LeaseError::corrupt(
                    location,
                    "the worker id was leased before (epoch > 0) but its hash has no state \
                     field: its high-water marks were lost (a reset or restored key?)",
                ))
            } else {
                Ok(None)
            };
        }
        if text.is_empty() {
            // The empty record of a first grant: never used, any layout may start here.
            return Ok(None);
        }
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

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

impl RedisCoordinator {
    /// The replication guard (`min_replicas`, `replication=async`).
    pub(crate) fn with_replication(mut self, replication: Replication) -> RedisCoordinator {
        self.replication = replication;
        self
    }

    /// Refuses a server that is not a primary (`ROLE`): a replica's copy of the leases may be
    /// behind, and what is written there is not the primary's. At the first call, also
    /// refuses a primary whose replicas nothing guards (see the module's docs).
    fn check_primary(&mut self) -> Result<(), LeaseError> {
        let role: ::redis::Value =
            self.with_connection(|connection| ::redis::cmd("ROLE").query(connection))?;
        let role = match &role {
            ::redis::Value::Array(items) => items.first().and_then(|first| match first {
                ::redis::Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
                ::redis::Value::SimpleString(text) => Some(text.as_str()),
                _ => None,
            }),
            _ => None,
        }
        .unwrap_or("unknown")
        .to_owned();
        if role != "master" {
            return Err(self.unavailable(format!(
                "the server is a {role}, not a primary (ROLE): grants and renewals go to the \
                 primary only"
            )));
        }
        if self.replication_checked {
            return Ok(());
        }
        let info: String = self.with_connection(|connection| {
            ::redis::cmd("INFO").arg("replication").query(connection)
        })?;
        let replicas = info
            .lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|count| count.trim().parse::<u32>().ok())
            .unwrap_or(0);
        // CONFIG may be renamed away on managed servers: then the server's guard is unknown.
        let server_guard: u32 = self
            .with_connection(|connection| {
                ::redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("min-replicas-to-write")
                    .query::<Vec<String>>(connection)
            })
            .ok()
            .and_then(|pair| pair.get(1).and_then(|count| count.parse().ok()))
            .unwrap_or(0);
        let guarded = self.replication.min_replicas > 0 || server_guard > 0;
        if replicas > 0 && !guarded && !self.replication.accept_async {
            return Err(LeaseError::InvalidUri {
                uri: self.redacted_uri.clone(),
                reason: format!(
                    "the server has {replicas} replica(s) and nothing makes a grant or renewal \
                     wait for them: a failover to a replica behind the primary would repeat ids. \
                     Add min_replicas=N (each grant and renewal waits for N replicas), or set \
                     min-replicas-to-write on the server, or accept the risk with \
                     replication=async"
                ),
            });
        }
        self.replication_checked = true;
        Ok(())
    }

    /// With `min_replicas=N`: `WAIT N` for the write just made; fewer acknowledgements within
    /// half the patience and it does not count.
    fn await_replicas(&mut self, what: &str) -> Result<(), LeaseError> {
        let wanted = self.replication.min_replicas;
        if wanted == 0 {
            return Ok(());
        }
        let timeout_ms = u64::try_from((self.patience() / 2).as_millis()).unwrap_or(u64::MAX);
        let acknowledged: u32 = self.with_connection(|connection| {
            ::redis::cmd("WAIT")
                .arg(wanted)
                .arg(timeout_ms.max(1))
                .query(connection)
        })?;
        if acknowledged < wanted {
            return Err(self.unavailable(format!(
                "only {acknowledged} of min_replicas={wanted} replicas acknowledged the {what} \
                 within {timeout_ms} ms: it does not count"
            )));
        }
        Ok(())
    }

    /// Leases only worker ids in `workers` (the URI's `workers=LO-HI`). The range is written
    /// into the lease key's value (`EPOCH OWNER workers=LO-HI`), where other pools read it to
    /// refuse a range that overlaps theirs (`WORKER_RANGE_CONFLICT`).
    pub(crate) fn with_workers(mut self, workers: Option<WorkerRange>) -> RedisCoordinator {
        let token = self
            .owner
            .rsplit_once(" workers=")
            .map_or(self.owner.as_str(), |(token, _)| token);
        self.owner = owner_with_range(token, workers.as_ref());
        self.workers = workers;
        self
    }

    /// `WORKER_RANGE_CONFLICT` if a live lease of the app declares a range that overlaps this
    /// pool's (`pool` without a `workers` range) and differs from it.
    fn check_live_ranges(
        &mut self,
        max: u64,
        pool: &std::ops::RangeInclusive<u64>,
    ) -> Result<(), LeaseError> {
        let prefix = self.prefix.clone();
        let live: Vec<(u64, String)> = self.with_connection(|connection| {
            ::redis::Script::new(DECLARED)
                .arg(&prefix)
                .arg(max)
                .invoke(connection)
        })?;
        check_ranges(
            &self.redacted_uri,
            self.workers.as_ref(),
            pool,
            live.iter()
                .map(|(worker, value)| (*worker, declared_range(value))),
        )
    }

    /// The start-up clock check's bound (`max_skew`; `None`: off); 5 s by default.
    pub fn with_max_skew(mut self, max_skew: Option<Duration>) -> RedisCoordinator {
        self.max_skew = max_skew;
        self
    }
}

impl Coordinator for RedisCoordinator {
    fn redacted_uri(&self) -> String {
        self.redacted_uri.clone()
    }

    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        if self.held.is_some() {
            return Err(self.unavailable("this coordinator already holds a lease"));
        }
        let workers = pool(&self.redacted_uri, layout, self.workers.as_ref())?;
        self.check_primary()?;
        self.check_live_ranges(layout.max_worker_id(), &workers)?;
        let (first, max) = (*workers.start(), *workers.end());
        let prefix = self.prefix.clone();
        // The lowest free worker ids and their records, tried in `preference_order`.
        let listed: Vec<Listed> = self.with_connection(|connection| {
            ::redis::Script::new(LIST)
                .arg(&prefix)
                .arg(max)
                .arg(CANDIDATES)
                .arg(first)
                .invoke(connection)
        })?;
        let candidates: Vec<u64> = preference_order(
            layout,
            now_ms,
            listed.iter().map(|(worker, epoch, has_state, text)| {
                (
                    *worker,
                    self.state_of(*worker, *epoch > 0, *has_state == 1, text),
                )
            }),
        );
        let (owner, ttl_ms) = (self.owner.clone(), self.ttl_ms());
        let granted: Option<Listed> = self.with_connection(|connection| {
            let script = ::redis::Script::new(GRANT);
            let mut invocation = script.prepare_invoke();
            invocation
                .arg(&prefix)
                .arg(&owner)
                .arg(ttl_ms)
                .arg(max)
                .arg(first);
            for worker in &candidates {
                invocation.arg(*worker);
            }
            invocation.invoke(connection)
        })?;
        let Some((worker_id, epoch, has_state, text)) = granted else {
            return Err(exhausted(&self.redacted_uri, layout, self.workers.as_ref()));
        };
        self.held = Some((worker_id, epoch, format!("{epoch} {owner}")));
        self.renewals = 0;
        if let Err(error) = self.await_replicas("grant") {
            let _ = self.release(None);
            return Err(error);
        }
        let state = self.state_of(worker_id, epoch > 1, has_state == 1, &text);
        let ttl = self.ttl;
        Grant::or_release(self, worker_id, state, ttl)
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        let Some((worker_id, epoch, value)) = self.held.clone() else {
            return Err(LeaseError::lost("this coordinator holds no lease"));
        };
        let (lease, worker) = self.keys(worker_id);
        let (ttl_ms, record) = (self.ttl_ms(), crate::record::encode(state));
        self.check_primary()?;
        self.renewals += 1;
        let number = self.renewals;
        let renewed: i64 = self.with_connection(|connection| {
            ::redis::Script::new(RENEW)
                .key(&lease)
                .key(&worker)
                .arg(&value)
                .arg(epoch)
                .arg(ttl_ms)
                .arg(&record)
                .arg(number)
                .invoke(connection)
        })?;
        LeaseError::unless_renewed(renewed == 1, &mut self.held, worker_id, epoch)?;
        self.await_replicas("renewal")
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let Some((worker_id, epoch, value)) = self.held.take() else {
            return Ok(());
        };
        let (lease, worker) = self.keys(worker_id);
        let record = state.map(crate::record::encode);
        let _released: i64 = self.with_connection(|connection| {
            let script = ::redis::Script::new(RELEASE);
            let mut invocation = script.key(&lease);
            invocation.key(&worker).arg(&value).arg(epoch);
            if let Some(record) = &record {
                invocation.arg(record);
            }
            invocation.invoke(connection)
        })?;
        Ok(())
    }

    /// Redis `TIME`: seconds and microseconds on the server's clock.
    fn server_time_ms(&mut self) -> Result<Option<u64>, LeaseError> {
        let (seconds, micros): (u64, u64) =
            self.with_connection(|connection| ::redis::cmd("TIME").query(connection))?;
        Ok(Some(seconds * 1000 + micros / 1000))
    }

    fn max_skew(&self) -> Option<Duration> {
        self.max_skew
    }

    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        let (_, worker) = self.keys(worker_id);
        let (epoch, state): (Option<i64>, Option<Vec<u8>>) =
            self.with_connection(|connection| {
                ::redis::cmd("HMGET")
                    .arg(&worker)
                    .arg("epoch")
                    .arg("state")
                    .query(connection)
            })?;
        let has_state = state.is_some();
        self.state_of(
            worker_id,
            epoch.unwrap_or(0) > 0,
            has_state,
            &state.unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::uri::connect;

    fn refusal(uri: &str) -> String {
        match connect(uri) {
            Ok(target) => format!("OK {}", target.coordinator.redacted_uri()),
            Err(error) => format!("{} {error}", error.code()),
        }
    }

    #[test]
    fn redis_uris_are_taken_apart_without_their_password() {
        let shown = refusal("redis://me:s3cret@cache:6380/2?app=orders&ttl=2s");
        assert_eq!(shown, "OK redis://me@cache:6380/2?app=orders");
        let shown = refusal("rediss://:s3cret@[::1]:6380/0?app=a");
        assert_eq!(shown, "OK rediss://[::1]:6380/0?app=a");
        assert_eq!(refusal("redis://cache"), "OK redis://cache?app=default");
    }

    #[test]
    fn bad_redis_uris_are_refused_with_invalid_uri() {
        for (uri, says) in [
            ("redis://h:1/x", "database number"),
            ("redis://h:1/-1", "database number"),
            ("redis://h:1/0?ttl=100ms", "ttl must be between"),
            ("redis://h:1/0?ttl=bad", "ttl must look like"),
            ("redis://h:1/0?app=a/b", "app must be"),
            ("redis://h:1/0?table=t", "unknown parameter \"table\""),
            ("redis://h:1,h:2/0", "one host"),
            ("redis:///0", "one host"),
            ("redis://h:1/0?cacert=/ca.pem", "rediss://"),
            ("rediss://h:1/0?cacert=/nonexistent/ca.pem", "cannot read"),
            ("redis://:%FF@h:1/0", "not UTF-8"),
            ("redis://:pw@h:99999/0", "invalid port"),
        ] {
            let shown = refusal(uri);
            assert!(shown.starts_with("INVALID_URI "), "{uri}: {shown}");
            assert!(shown.contains(says), "{uri}: {shown}");
        }
        let shown = refusal("ftp://h/x");
        assert!(shown.contains("redis://"), "the schemes listed: {shown}");
    }
}
