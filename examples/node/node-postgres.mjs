// node-postgres: bigint ids in and out of a BIGINT column.
import pg from 'pg';

// pg returns BIGINT (int8, type 20) as a string by default, to lose nothing; read it as a bigint.
pg.types.setTypeParser(pg.types.builtins.INT8, (text) => BigInt(text));

export async function saveOrders(pool, ids, items) {
  await pool.query('CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, item TEXT NOT NULL)');
  const saved = [];
  for (const item of items) {
    const id = ids.nextId();
    // A bigint parameter is sent as its decimal text: exact, whatever its size.
    await pool.query('INSERT INTO orders (id, item) VALUES ($1, $2)', [id, item]);
    saved.push(id);
  }
  return saved;
}

export async function ordersBetween(pool, low, high) {
  const { rows } = await pool.query('SELECT id, item FROM orders WHERE id BETWEEN $1 AND $2 ORDER BY id', [low, high]);
  return rows; // [{ id: 383...n, item: '...' }]
}
