// Express: bigint ids in JSON responses as decimal strings, through the package's replacer; a
// leased worker id, a readiness route, and SIGTERM handling that releases the worker id.
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

  // Readiness: 200 while the generator holds its lease; 503 while a lost lease is leased again
  // ("healing", with why it was lost) and once closed. stats() never throws (workerId is null
  // while healing; reading ids.workerId then throws the retryable COORDINATOR_UNAVAILABLE).
  app.get('/readyz', (_req, res) => {
    const { state, workerId, lastLoss } = ids.stats();
    res.status(ids.isActive ? 200 : 503).json({ state, workerId, lastLoss });
  });
  return app;
}

// Run: CLOCKFLAKE_URI='file:///var/lib/myapp/ids?app=orders' node express.mjs
if (import.meta.url === `file://${process.argv[1]}`) {
  const ids = await Generator.open(process.env.CLOCKFLAKE_URI); // off the event loop
  const server = createApp(ids).listen(Number(process.env.PORT ?? 3000), () => {
    console.log(`http://localhost:${server.address().port} worker ${ids.workerId}`);
  });
  process.once('SIGTERM', () => {
    // Stop accepting; once the requests in flight are answered, release the worker id.
    server.close(async () => {
      const { workerId } = ids.stats();
      await ids.close();
      console.log(`worker ${workerId} released`);
    });
  });
}
