// The options every generator takes (`new Generator`, `Generator.resume`, `Generator.open`),
// checked and parsed once: the layout's record, the rollback policy and its waits, a clock.
import { integer, onlyKnownKeys, plainObject, typeError } from './errors.js';
import { layoutRecord } from './layouts.js';

/** `options` checked against the names `allowed`: `{ record, onRollback, maxWaitMs, maxDriftMs, clock }`. */
export function generatorOptions(options, allowed, name) {
  plainObject(options, name);
  onlyKnownKeys(options, allowed, name);
  const { onRollback, maxWaitMs, maxDriftMs, clock } = options;
  if (onRollback !== undefined && typeof onRollback !== 'string') {
    throw typeError('onRollback', "'clock-sequence' | 'wait' | 'logical' | 'fail'", onRollback);
  }
  if (clock !== undefined && typeof clock !== 'function') throw typeError('clock', 'a function returning Unix ms', clock);
  return {
    record: layoutRecord(options.layout),
    onRollback,
    maxWaitMs: maxWaitMs === undefined ? undefined : integer(maxWaitMs, 'maxWaitMs', 'INVALID_ARG_VALUE'),
    maxDriftMs: maxDriftMs === undefined ? undefined : integer(maxDriftMs, 'maxDriftMs', 'INVALID_ARG_VALUE'),
    clock: clock ?? null,
  };
}
