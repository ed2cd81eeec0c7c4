// Every shared vector (tests/vectors/*.json and tests/vectors/public/*.json) through the one JS
// harness the wasm binding shares.
import * as api from '../lib/index.mjs';
import { registerPublicVectorTests, registerVectorTests } from '../../tests/harness/node-vectors.mjs';

registerVectorTests(api, 'node');
registerPublicVectorTests(api, 'node');
