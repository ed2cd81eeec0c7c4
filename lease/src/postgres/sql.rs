//! The SQL every statement shares: the table, the server's timeline, and what a grant writes
//! into a row (with the failover fence of a row written before a promotion).

use clockflake::MAX_CLOCK_SEQS;

/// The table, created if missing (`{table}` is replaced by the `table=` parameter,
/// `clockflake_leases` by default).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS {table} (
    app                text        NOT NULL,
    worker_id          integer     NOT NULL,
    owner              text,
    epoch              bigint      NOT NULL DEFAULT 0,
    expires_at         timestamptz,
    layout_fingerprint bigint,
    clock_seq          integer,
    high_water_ms      bigint[],
    updated_at         timestamptz NOT NULL DEFAULT now(),
    timeline           bigint,
    PRIMARY KEY (app, worker_id)
)";

/// The columns of [`SCHEMA`] and their types as `format_type` names them, which a table of that
/// name must have to be used: rows are read with these types, and another type would not read.
pub(super) const COLUMNS: [(&str, &str); 10] = [
    ("app", "text"),
    ("worker_id", "integer"),
    ("owner", "text"),
    ("epoch", "bigint"),
    ("expires_at", "timestamp with time zone"),
    ("layout_fingerprint", "bigint"),
    ("clock_seq", "integer"),
    ("high_water_ms", "bigint[]"),
    ("updated_at", "timestamp with time zone"),
    ("timeline", "bigint"),
];

/// A renewal's marks (`$8`), each raised to at least the stored one (of the same layout,
/// `$6`): a renewal is never allowed to lower a mark. The renewal thread gives up on a renewal
/// that does not answer in time and sends the next on a new connection; the one given up on
/// may still reach the server, and run, after the next one (the server frozen, or the packets
/// late). Stored as sent, its lower marks would let a later holder of the worker id resume
/// below ids issued under the newer reservation; raised, the stored marks only ever grow
/// while the lease is held. (A release stores the exact marks, lower than the reservation:
/// it is the holder's last write, and no renewal of its lease runs after it, the owner
/// cleared.)
pub(super) const RAISED_MARKS: &str = "CASE WHEN layout_fingerprint = $6 \
        AND high_water_ms IS NOT NULL THEN ARRAY( \
        SELECT GREATEST(sent, stored) \
        FROM unnest($8::bigint[], high_water_ms) WITH ORDINALITY AS marks(sent, stored, n) \
        ORDER BY n) \
    ELSE $8 END";

/// The server's WAL timeline: 1 on a new cluster, one more at every promotion of a replica.
/// Every grant and renewal records it in the row; only a primary can say
/// (`pg_current_wal_lsn` fails on a standby, which refuses writes anyway).
pub(super) const TIMELINE: &str =
    "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint";

/// A row last written on an earlier timeline than the server's: this server was promoted
/// since, and its copy of the row may miss writes the old primary acknowledged (an
/// asynchronous replica promoted while behind). A NULL timeline is a row written before
/// this column existed: read as current.
pub(super) fn stale() -> String {
    format!("(timeline IS NOT NULL AND timeline < {TIMELINE})")
}

/// The state part of a grant's SET list (in a `SET` list every column reads its value
/// before the update).
///
/// A stale row (see [`stale`]): every clock sequence's mark is raised to at least the
/// server's clock plus `$5` ms (the first `$7`, the layout's clock sequences), the longest a lost renewal (or a lost grant to someone else)
/// could have let its holder go on issuing ids, so that the new holder issues none at or
/// below any the old one could have. A stale row never granted in this copy (`epoch` 0) may
/// have been granted on the old primary: it gets this layout's fingerprint (`$6`) and the
/// raised marks. A row whose marks are NULL though granted before stays so (refused as
/// `INVALID_STATE`).
///
/// Any other row at its first grant (`epoch` 0) gets an empty state record, so that from
/// then on NULL columns can only mean marks that were lost (a row reset by hand, a careless
/// migration), which is refused (`INVALID_STATE`) instead of read as "never used".
pub(super) fn granted_marks() -> String {
    let stale = stale();
    format!(
        "layout_fingerprint = CASE WHEN {stale} AND epoch = 0 THEN $6 \
             WHEN epoch = 0 THEN 0 ELSE layout_fingerprint END, \
         clock_seq = CASE WHEN epoch = 0 THEN 0 ELSE clock_seq END, \
         high_water_ms = CASE \
             WHEN {stale} AND (epoch = 0 OR high_water_ms IS NOT NULL) THEN ARRAY( \
                 SELECT CASE WHEN n <= $7 \
                     THEN GREATEST(mark, floor(extract(epoch FROM now()) * 1000)::bigint + $5) END \
                 FROM unnest(coalesce(high_water_ms, \
                     array_fill(NULL::bigint, ARRAY[{MAX_CLOCK_SEQS}]))) \
                     WITH ORDINALITY AS marks(mark, n) ORDER BY n) \
             WHEN epoch = 0 THEN array_fill(NULL::bigint, ARRAY[{MAX_CLOCK_SEQS}]) \
             ELSE high_water_ms END, \
         timeline = {TIMELINE}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `COLUMNS` names every column `SCHEMA` creates, in its order, with its type, and nothing
    /// else: a column added to one and not the other would let a table without it be used, or
    /// refuse ours.
    #[test]
    fn columns_are_the_schemas() {
        let created: Vec<(&str, String)> = SCHEMA
            .lines()
            .skip(1)
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                Some((words.next()?, words.next()?))
            })
            .filter(|(word, _)| word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .map(|(name, kind)| {
                let kind = kind.trim_end_matches(',');
                let kind = kind.replace("timestamptz", "timestamp with time zone");
                (name, kind)
            })
            .collect();
        let expected: Vec<(&str, String)> = COLUMNS
            .iter()
            .map(|&(name, kind)| (name, kind.to_owned()))
            .collect();
        assert_eq!(created, expected);
    }
}
