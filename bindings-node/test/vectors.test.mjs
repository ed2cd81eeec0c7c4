// Every shared vector (tests/vectors/*.json) through the one JS harness the wasm binding shares.
import * as api from '../index.mjs';
import { registerVectorTests } from '../../tests/harness/node-vectors.mjs';

registerVectorTests(api, 'node');
