import { createHook } from 'node:async_hooks';

/** Queue entries of `process.nextTick` kept for the process's life (see `retainTickShapes`). */
const retained: object[] = [];

function noop(): void {}

/**
 * Keeps two of `process.nextTick`'s queue entries alive for the process's life, so that the hidden
 * class (V8's "map") every entry is made with never dies.
 *
 * Why: node:http calls `process.nextTick` about nine times a request, and each call makes its
 * entry as an object literal with two computed (symbol) keys. Between bursts the queue is empty,
 * so no entry is alive; a full garbage collection then drops the entries' map, and the next call
 * makes a new one. After a few of those, the literal's inline cache in `nextTick` has seen too
 * many maps and stays megamorphic: every entry is then made by V8's runtime
 * (`Runtime_DefineKeyedOwnPropertyInLiteral`, with map migrations), about 0.25 µs instead of
 * 0.015. The service, whose visits and clicks live for a flush interval, got there in about half
 * of its processes, at about 2.5 µs of CPU a redirect (bench/PROFILE.md, "nextTick"); the bench's
 * bare node:http baseline got there too, once it idled between runs (V8's memory reducer collects
 * an idle heap), and now calls this as well. An entry kept alive keeps its map, and the
 * transitions to it, alive: the cache stays monomorphic.
 *
 * The entries are caught as they are made, through an `init` hook enabled for those two calls
 * only (no hook is left enabled). Call once, early, in a serving process.
 */
export function retainTickShapes(): void {
  if (retained.length > 0) return;
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject') retained.push(resource);
    },
  });
  hook.enable();
  try {
    process.nextTick(noop); // an entry without arguments
    process.nextTick(noop, 0); // and one with
  } finally {
    hook.disable();
  }
}

/** The entries `retainTickShapes` keeps (tests). */
export function retainedTickShapes(): readonly object[] {
  return retained;
}
