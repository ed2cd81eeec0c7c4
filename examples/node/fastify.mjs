// Fastify: bigint ids in JSON, two ways: a reply serializer for routes without a schema, and
// `type: 'string'` in a response schema (fast-json-stringify then writes the bigint as text); a
// leased worker id, a readiness route, and SIGTERM handling that releases the worker id.
import Fastify from 'fastify';
import { Generator, stringify } from 'clockflake';

export function createApp(ids) {
  const app = Fastify();
  // Routes without a response schema: JSON.stringify would throw on a bigint.
  app.setReplySerializer((payload) => stringify(payload));

  app.post('/orders', async (request, reply) => {
    reply.code(201);
    return { id: ids.nextId(), item: String(request.body.item) };
  });

  const order = {
    type: 'object',
    properties: { id: { type: 'string' }, item: { type: 'string' } }, // not 'integer': unsafe
  };
  app.get('/orders/:id', { schema: { response: { 200: order } } }, async (request) => {
    return { id: BigInt(request.params.id), item: 'from the schema route' };
  });

  // Readiness: 200 while the generator holds its lease; 503 while a lost lease is leased again
  // ("healing", with why it was lost) and once closed. stats() never throws (workerId is null
  // while healing; reading ids.workerId then throws the retryable COORDINATOR_UNAVAILABLE).
  app.get('/readyz', async (_request, reply) => {
    const { state, workerId, lastLoss } = ids.stats();
    reply.code(ids.isActive ? 200 : 503);
    return { state, workerId, lastLoss };
  });
  return app;
}

// Run: CLOCKFLAKE_URI='file:///var/lib/myapp/ids?app=orders' node fastify.mjs
if (import.meta.url === `file://${process.argv[1]}`) {
  const ids = await Generator.open(process.env.CLOCKFLAKE_URI); // off the event loop
  const app = createApp(ids);
  // app.close() stops accepting and answers the requests in flight, then runs onClose hooks.
  app.addHook('onClose', async () => {
    const { workerId } = ids.stats();
    await ids.close();
    console.log(`worker ${workerId} released`);
  });
  process.once('SIGTERM', () => app.close());
  const address = await app.listen({ port: Number(process.env.PORT ?? 3000) });
  console.log(`${address} worker ${ids.workerId}`);
}
