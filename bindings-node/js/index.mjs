// Node's ES module entry: the very objects of the CommonJS entry (one copy of the package's
// state, whichever way it is loaded), under the names api.js lists.
export * from './index.cjs';
export { default } from './index.cjs';
