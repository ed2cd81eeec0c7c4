-- clockflake 0.1.0: the SQL surface of the extension, written by hand (make.mk checks that every
-- 'X_wrapper' symbol named here is exported by the library). The library must be in
-- shared_preload_libraries; CREATE EXTENSION fails with a clear ERROR otherwise.
\echo Use "CREATE EXTENSION clockflake" to load this file. \quit

-- What an id says: the start of its tick, its clock sequence, worker id and sequence number.
CREATE TYPE clockflake.id_parts AS (
    ts timestamptz,
    clock_seq integer,
    worker_id bigint,
    sequence bigint
);

-- The lowest and highest id of a time window.
CREATE TYPE clockflake.id_bounds AS (
    lo bigint,
    hi bigint
);

-- The next id of the server's one generator (shared memory, one compare-and-swap per id).
-- VOLATILE: a new id every call. PARALLEL RESTRICTED: runs in the leader only (the generator
-- is in shared memory, so a worker would be sound too; restricted keeps the per-connection
-- order of a plain INSERT ... SELECT).
CREATE FUNCTION clockflake.next_id() RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL RESTRICTED
    AS 'MODULE_PATHNAME', 'next_id_wrapper';
COMMENT ON FUNCTION clockflake.next_id() IS
    'The next id of the server''s generator; usable as a column DEFAULT.';

-- n new ids, strictly increasing.
CREATE FUNCTION clockflake.next_ids(n integer) RETURNS SETOF bigint
    LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED ROWS 100
    AS 'MODULE_PATHNAME', 'next_ids_wrapper';
COMMENT ON FUNCTION clockflake.next_ids(integer) IS
    'n new ids of the server''s generator, strictly increasing (bulk inserts).';

-- IMMUTABLE: the result depends on the id and on clockflake.layout, which is fixed at server
-- start (changing the layout of a server that already made ids is changing what they mean).
CREATE FUNCTION clockflake.decode(id bigint) RETURNS clockflake.id_parts
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'decode_wrapper';
COMMENT ON FUNCTION clockflake.decode(bigint) IS
    'What an id says under the server''s layout: ts, clock_seq, worker_id, sequence.';

CREATE FUNCTION clockflake.id_range("from" timestamptz, "to" timestamptz)
    RETURNS clockflake.id_bounds
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'id_range_wrapper';
COMMENT ON FUNCTION clockflake.id_range(timestamptz, timestamptz) IS
    'The lowest and highest id of a time window, both ends inclusive (WHERE id BETWEEN lo AND hi).';

-- How this server gets its worker id, and what its lease has been through.
CREATE TYPE clockflake.lease_status AS (
    state text,
    worker_id bigint,
    coordinator text,
    deadline timestamptz,
    losses bigint,
    heals bigint,
    failed_attempts bigint,
    last_loss text,
    last_error text
);

-- state: unleased (a worker id typed by hand), none (no worker id configured), or the lease
-- worker's starting, active, healing (the lease lost, leasing again) or stopped.
CREATE FUNCTION clockflake.lease_status() RETURNS clockflake.lease_status
    LANGUAGE c VOLATILE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'lease_status_wrapper';
COMMENT ON FUNCTION clockflake.lease_status() IS
    'How this server gets its worker id: state, worker_id, coordinator, deadline, losses, heals, failed_attempts, last_loss, last_error.';
