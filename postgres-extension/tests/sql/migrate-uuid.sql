-- The uuid migration of docs/recipes/postgresql-migration.md, run by tests/run.sh in a database
-- of its own: the section between the --8<-- markers is the page's SQL. Raises on any failed
-- check.
CREATE EXTENSION clockflake;

-- Before: a random uuid key (so its order is not the creation order), rows made three to a
-- minute (ties broken by the uuid), and a table whose foreign key points at it.
CREATE TABLE accounts (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL DEFAULT now(),
    name text NOT NULL
);
CREATE TABLE sessions (
    account_id uuid NOT NULL REFERENCES accounts,
    note text NOT NULL
);
INSERT INTO accounts (created_at, name)
SELECT timestamptz '2025-01-01 00:00+00' + (g / 3) * interval '1 minute', 'account ' || g
  FROM generate_series(1, 500) AS g;
INSERT INTO sessions SELECT id, name FROM accounts, generate_series(1, 2);
CREATE TABLE accounts_before AS SELECT id AS uuid, created_at, name FROM accounts;

-- --8<-- [start:migrate]
BEGIN;
-- 1. A bigint for every row, in creation order: next_ids(n) gives n increasing ids.
ALTER TABLE accounts ADD COLUMN new_id bigint;
UPDATE accounts SET new_id = numbered.new_id
  FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM accounts) AS ordered
  JOIN clockflake.next_ids((SELECT count(*)::integer FROM accounts))
       WITH ORDINALITY AS numbered (new_id, n) USING (n)
 WHERE accounts.id = ordered.id;
-- 2. Every table that points at accounts gets the new key beside the old one.
ALTER TABLE sessions ADD COLUMN account_new_id bigint;
UPDATE sessions SET account_new_id = accounts.new_id
  FROM accounts WHERE accounts.id = sessions.account_id;
-- 3. Swap: the bigint becomes the key, made by next_id() from now on; the uuid stays, unique,
--    for links already handed out.
ALTER TABLE sessions DROP CONSTRAINT sessions_account_id_fkey;
ALTER TABLE accounts DROP CONSTRAINT accounts_pkey;
ALTER TABLE accounts RENAME COLUMN id TO uuid;
ALTER TABLE accounts ADD UNIQUE (uuid);
ALTER TABLE accounts RENAME COLUMN new_id TO id;
ALTER TABLE accounts ALTER COLUMN id SET DEFAULT clockflake.next_id(), ADD PRIMARY KEY (id);
ALTER TABLE sessions DROP COLUMN account_id;
ALTER TABLE sessions RENAME COLUMN account_new_id TO account_id;
ALTER TABLE sessions ALTER COLUMN account_id SET NOT NULL,
    ADD FOREIGN KEY (account_id) REFERENCES accounts (id);
COMMIT;
-- --8<-- [end:migrate]

DO $$
DECLARE
  made bigint;
BEGIN
  -- Every account kept its uuid and got a bigint id, increasing in creation order.
  IF (SELECT count(*) FROM accounts JOIN accounts_before USING (uuid, created_at, name)) <> 500
     OR (SELECT count(DISTINCT id) FROM accounts) <> 500 THEN
    RAISE EXCEPTION 'accounts lost or ids repeated';
  END IF;
  IF (SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY created_at, uuid) AS before
        FROM accounts) AS a WHERE id <= before) <> 0 THEN
    RAISE EXCEPTION 'ids not in creation order';
  END IF;
  -- Every session points at the account it pointed at before.
  IF (SELECT count(*) FROM sessions JOIN accounts ON accounts.id = account_id
       WHERE accounts.name = note) <> 1000 THEN
    RAISE EXCEPTION 'sessions point at other accounts';
  END IF;
  -- New rows: a bigint by the default above every migrated one, a uuid by its old default.
  INSERT INTO accounts (name) VALUES ('new') RETURNING id INTO made;
  IF made <= (SELECT max(id) FROM accounts WHERE name <> 'new')
     OR (SELECT uuid FROM accounts WHERE id = made) IS NULL
     OR (clockflake.decode(made)).worker_id <> 5 THEN
    RAISE EXCEPTION 'a new account: id %', made;
  END IF;
  INSERT INTO sessions (account_id, note) VALUES (made, 'new');
  BEGIN
    INSERT INTO sessions (account_id, note) VALUES (made + 1, 'no such account');
    RAISE EXCEPTION 'a session of no account was accepted';
  EXCEPTION WHEN foreign_key_violation THEN
    NULL;
  END;
  IF (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
       WHERE attrelid = 'sessions'::regclass AND attname = 'account_id') <> 'bigint' THEN
    RAISE EXCEPTION 'sessions.account_id is not a bigint';
  END IF;
END $$;
