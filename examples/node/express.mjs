// Express: bigint ids in JSON responses as decimal strings, through the package's replacer.
import express from 'express';
import { Generator, jsonReplacer } from 'clockflake';

export function createApp(ids) {
  const app = express();
  // Without this, res.json({ id }) answers 500: "Do not know how to serialize a BigInt".
  app.set('json replacer', jsonReplacer);
  app.use(express.json());
  const orders = new Map();

  app.post('/orders', (req, res) => {
    const order = { id: ids.nextId(), item: String(req.body.item) };
    orders.set(order.id, order);
    res.status(201).json(order); // {"id":"383...","item":"..."}
  });

  app.get('/orders/:id', (req, res) => {
    // Ids arrive as decimal strings; BigInt() reads them exactly (a Number would round them).
    if (!/^\d{1,19}$/.test(req.params.id)) return res.status(400).json({ error: 'not an id' });
    const order = orders.get(BigInt(req.params.id));
    if (order === undefined) return res.status(404).json({ error: 'no such order' });
    res.json(order);
  });
  return app;
}

// Run: node express.mjs (a fixed worker id here; `await Generator.open(uri)` leases one).
if (import.meta.url === `file://${process.argv[1]}`) {
  const ids = new Generator({ workerId: Number(process.env.WORKER_ID ?? 0) });
  createApp(ids).listen(3000, () => console.log('http://localhost:3000'));
}
