// The shared vectors (tests/vectors/*.json) against the `--target nodejs` build.
import * as api from '../../pkg/node/index.js';
import { registerVectorTests } from '../../../tests/harness/node-vectors.mjs';

registerVectorTests(api, 'wasm-node');
