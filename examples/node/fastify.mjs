// Fastify: bigint ids in JSON, two ways: a reply serializer for routes without a schema, and
// `type: 'string'` in a response schema (fast-json-stringify then writes the bigint as text).
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
  return app;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const app = createApp(new Generator({ workerId: Number(process.env.WORKER_ID ?? 0) }));
  await app.listen({ port: 3000 });
}
