// The shared vectors (tests/vectors/*.json and tests/vectors/public/*.json) against the
// `--target nodejs` build.
import * as api from '../../pkg/node/index.js';
import { registerPublicVectorTests, registerVectorTests } from '../../../tests/harness/node-vectors.mjs';

registerVectorTests(api, 'wasm-node');
registerPublicVectorTests(api, 'wasm-node');
