// Serves the ID inspector (and, for the tests and benchmarks, the shared vectors and the
// benchmark page) on a loopback port. No third-party code, no outside requests.
//   node www/serve.mjs [--port 8737]     (port 0 picks a free one)
import { createServer } from 'node:http';
import { readFile, readdir } from 'node:fs/promises';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const WASM_DIR = resolve(HERE, '..');
const ROOT = resolve(WASM_DIR, '..');

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/plain; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.ts': 'text/plain; charset=utf-8',
};

// URL prefix -> directory. The page imports the clockflake package's browser build
// (bindings-node/lib, `make build-js`); the bench pages use pkg/web; all under one origin.
const MOUNTS = [
  ['/clockflake/', join(ROOT, 'bindings-node', 'lib')],
  ['/pkg/web/', join(WASM_DIR, 'pkg', 'web')],
  ['/vectors/', join(ROOT, 'tests', 'vectors')],
  ['/harness/', join(ROOT, 'tests', 'harness')],
  ['/bench/', join(WASM_DIR, 'bench')],
  ['/', join(WASM_DIR, 'www')],
];

async function respond(request, response) {
  const url = new URL(request.url, 'http://localhost');
  let path = decodeURIComponent(url.pathname);
  if (path === '/') path = '/index.html';
  // The vector files of a folder (tests/vectors/ or one of its subfolders such as public/).
  const listing = /^\/vectors\/(?:([a-z0-9_-]+)\/)?index\.json$/.exec(path);
  if (listing) {
    const names = (await readdir(join(ROOT, 'tests', 'vectors', listing[1] ?? ''))).filter((f) => f.endsWith('.json')).sort();
    response.writeHead(200, { 'content-type': TYPES['.json'], 'cache-control': 'no-store' });
    return response.end(JSON.stringify(names));
  }
  const [prefix, dir] = MOUNTS.find(([p]) => path.startsWith(p));
  const file = resolve(dir, `.${sep}${path.slice(prefix.length)}`);
  if (!file.startsWith(dir + sep)) {
    response.writeHead(403);
    return response.end('forbidden');
  }
  try {
    const body = await readFile(file);
    response.writeHead(200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'cache-control': 'no-store',
      // Cross-origin isolation: finer performance.now() for the benchmark page; harmless here.
      'cross-origin-opener-policy': 'same-origin',
      'cross-origin-embedder-policy': 'require-corp',
    });
    response.end(body);
  } catch {
    response.writeHead(404, { 'content-type': 'text/plain' });
    response.end('not found');
  }
}

/** Starts the server on 127.0.0.1; resolves to { server, url }. */
export function startServer(port = 8737) {
  const server = createServer((request, response) => {
    respond(request, response).catch((error) => {
      response.writeHead(500);
      response.end(String(error));
    });
  });
  return new Promise((done, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => done({ server, url: `http://127.0.0.1:${server.address().port}/` }));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--port');
  const port = at > 0 ? Number(process.argv[at + 1]) : 8737;
  const { url } = await startServer(port);
  console.log(`clockflake ID inspector: ${url}  (loopback only; Ctrl-C to stop)`);
}
