-- The SQL API on a server started with shared_preload_libraries = 'clockflake' and
-- clockflake.worker_id_unleased = 5 (tests/run.sh). Every check raises on failure.
CREATE EXTENSION clockflake;

-- The settings, fixed at start.
DO $$
BEGIN
  IF current_setting('clockflake.layout') <> 'clockseq'
     OR current_setting('clockflake.worker_id_unleased') <> '5' THEN
    RAISE EXCEPTION 'settings: layout %, worker id %', current_setting('clockflake.layout'),
      current_setting('clockflake.worker_id_unleased');
  END IF;
END $$;

-- A worker id typed by hand: no lease.
DO $$
BEGIN
  IF (SELECT (state, worker_id, coordinator) FROM clockflake.lease_status())
     IS DISTINCT FROM ('unleased'::text, 5::bigint, NULL::text) THEN
    RAISE EXCEPTION 'lease_status() = %', clockflake.lease_status();
  END IF;
END $$;

-- Volatility and parallel safety as declared.
DO $$
DECLARE wrong text;
BEGIN
  SELECT string_agg(proname || ' ' || provolatile::text || proparallel::text || ' ' || proisstrict::text, ', ')
    INTO wrong
    FROM pg_proc
   WHERE pronamespace = 'clockflake'::regnamespace
     AND (proname::text, provolatile::text, proparallel::text, proisstrict) NOT IN (
       ('next_id', 'v', 'r', false), ('next_ids', 'v', 'r', true),
       ('decode', 'i', 's', true), ('id_range', 'i', 's', true),
       ('lease_status', 'v', 's', false));
  IF wrong IS NOT NULL THEN
    RAISE EXCEPTION 'volatility, parallel safety or strictness: %', wrong;
  END IF;
END $$;

-- A column default; decode round-trips: the worker id, a time within the statement's.
CREATE TABLE api_t (id bigint PRIMARY KEY DEFAULT clockflake.next_id(), note text);
DO $$
DECLARE
  before_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
  made bigint;
  parts clockflake.id_parts;
  bounds clockflake.id_bounds;
  after_ms bigint;
BEGIN
  INSERT INTO api_t (note) VALUES ('first') RETURNING id INTO made;
  after_ms := floor(extract(epoch FROM clock_timestamp()) * 1000);
  parts := clockflake.decode(made);
  IF parts.worker_id <> 5 OR parts.clock_seq <> 0 OR parts.sequence < 0 THEN
    RAISE EXCEPTION 'decode(%) = %', made, parts;
  END IF;
  IF extract(epoch FROM parts.ts) * 1000 NOT BETWEEN before_ms AND after_ms THEN
    RAISE EXCEPTION 'decode(%).ts = % outside [% ms, % ms]', made, parts.ts, before_ms, after_ms;
  END IF;
  -- The id is in its own millisecond's range, and that range holds only that millisecond.
  bounds := clockflake.id_range(parts.ts, parts.ts);
  IF made NOT BETWEEN bounds.lo AND bounds.hi THEN
    RAISE EXCEPTION 'id_range(%, %) = % does not hold %', parts.ts, parts.ts, bounds, made;
  END IF;
  IF (clockflake.decode(bounds.lo)).ts <> parts.ts OR (clockflake.decode(bounds.hi)).ts <> parts.ts
     OR (clockflake.decode(bounds.lo)).sequence <> 0 THEN
    RAISE EXCEPTION 'id_range bounds % decode to other times', bounds;
  END IF;
END $$;

-- Known values: the layout's epoch is id 0's time; id_range of a window of whole seconds.
DO $$
BEGIN
  IF (clockflake.decode(0)).ts <> '2024-01-01T00:00:00Z'::timestamptz THEN
    RAISE EXCEPTION 'decode(0) = %', clockflake.decode(0);
  END IF;
  -- clockseq: 41 bits of ms above 22 bits; 2025-01-01T00:00:00Z is 31622400000 ms past the epoch.
  IF clockflake.id_range('2025-01-01T00:00:00Z', '2025-01-01T00:00:00.999Z')
     IS DISTINCT FROM ROW(31622400000::bigint << 22, ((31622400999::bigint + 1) << 22) - 1)::clockflake.id_bounds THEN
    RAISE EXCEPTION 'id_range of 2025-01-01 = %',
      clockflake.id_range('2025-01-01T00:00:00Z', '2025-01-01T00:00:00.999Z');
  END IF;
  IF clockflake.decode(NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'decode(NULL) is not NULL';
  END IF;
END $$;

-- next_ids: n ids, distinct, strictly increasing in the order returned; 0 gives none.
DO $$
DECLARE
  total bigint;
  distinct_ids bigint;
  not_increasing bigint;
BEGIN
  SELECT count(*), count(DISTINCT id),
         count(*) FILTER (WHERE id <= before)
    INTO total, distinct_ids, not_increasing
    FROM (SELECT id, lag(id) OVER (ORDER BY n) AS before
            FROM clockflake.next_ids(20000) WITH ORDINALITY AS g(id, n)) AS s;
  IF (total, distinct_ids, not_increasing) <> (20000::bigint, 20000::bigint, 0::bigint) THEN
    RAISE EXCEPTION 'next_ids(20000): % ids, % distinct, % not increasing', total, distinct_ids,
      not_increasing;
  END IF;
  IF (SELECT count(*) FROM clockflake.next_ids(0)) <> 0 THEN
    RAISE EXCEPTION 'next_ids(0) returned ids';
  END IF;
  -- Ids of later calls are above earlier ones (one generator, one clock sequence).
  IF (SELECT min(g) FROM clockflake.next_ids(10) AS g) <= (SELECT max(id) FROM api_t) THEN
    RAISE EXCEPTION 'next_ids after an insert issued a smaller id';
  END IF;
END $$;

-- Refusals: a SQLSTATE a caller can catch, core's code in the DETAIL.
CREATE FUNCTION pg_temp.refusal(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE state text; detail text;
BEGIN
  EXECUTE statement;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
  RETURN state || ' ' || coalesce(detail, '');
END $$;
DO $$
DECLARE
  cases text[][] := ARRAY[
    ['SELECT clockflake.decode(-1)', '22003 clockflake code: INVALID_ID'],
    ['SELECT clockflake.id_range(''2025-01-02'', ''2025-01-01'')', '22023 clockflake code: INVALID_RANGE'],
    ['SELECT clockflake.id_range(''2023-12-31'', ''2025-01-01'')', '22008 clockflake code: TIMESTAMP_OUT_OF_RANGE'],
    ['SELECT clockflake.id_range(''-infinity'', ''2025-01-01'')', '22008 clockflake code: TIMESTAMP_OUT_OF_RANGE'],
    ['SELECT clockflake.id_range(''2025-01-01'', ''infinity'')', '22008 clockflake code: TIMESTAMP_OUT_OF_RANGE'],
    ['SELECT clockflake.next_ids(-1)', '22023 ']];
  outcome text;
BEGIN
  FOR i IN 1 .. array_length(cases, 1) LOOP
    outcome := pg_temp.refusal(cases[i][1]);
    IF outcome <> cases[i][2] THEN
      RAISE EXCEPTION '%: expected "%", got "%"', cases[i][1], cases[i][2], outcome;
    END IF;
  END LOOP;
END $$;
