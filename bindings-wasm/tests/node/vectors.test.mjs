// The shared vectors (tests/vectors/*.json and tests/vectors/public/*.json) against the wasm
// engine, through the clockflake package's browser build (lib/browser.mjs: the engine inlined
// deflated, as pages get it; Node's build is covered by bindings-node/tests/vectors.test.mjs).
import * as api from '../../../bindings-node/lib/browser.mjs';
import { registerPublicVectorTests, registerVectorTests } from '../../../tests/harness/node-vectors.mjs';

registerVectorTests(api, 'wasm-browser-build');
registerPublicVectorTests(api, 'wasm-browser-build');
