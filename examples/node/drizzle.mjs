// Drizzle ORM on node-postgres: a bigint primary key whose default is the next clockflake id.
import { between, eq } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { bigint, pgTable, text } from 'drizzle-orm/pg-core';

export function ordersTable(ids) {
  return pgTable('drizzle_orders', {
    // mode 'bigint': read and written as a JavaScript bigint, never rounded through a number.
    id: bigint('id', { mode: 'bigint' })
      .primaryKey()
      .$defaultFn(() => ids.nextId()),
    item: text('item').notNull(),
  });
}

export async function example(pool, ids) {
  const orders = ordersTable(ids);
  const db = drizzle(pool);
  await pool.query('CREATE TABLE IF NOT EXISTS drizzle_orders (id BIGINT PRIMARY KEY, item TEXT NOT NULL)');
  const made = await db.insert(orders).values([{ item: 'book' }, { item: 'pen' }]).returning();
  const [one] = await db.select().from(orders).where(eq(orders.id, made[0].id));
  const all = await db.select().from(orders).where(between(orders.id, made[0].id, made[1].id));
  return { made, one, all };
}
