import { promiseHooks } from 'node:v8';
import { type Context, ROOT_CONTEXT } from '@opentelemetry/api';
// Not in the package's index, but a plain CommonJS module of it (no `exports` map): the
// function and EventEmitter binding that every Node context manager shares.
import { AbstractAsyncHooksContextManager } from '@opentelemetry/context-async-hooks/build/src/AbstractAsyncHooksContextManager.js';

/** Where a promise keeps the context it was created in (only when that is not the root context). */
const CONTEXT = Symbol('urlshortener.otel.context');
type Tagged = Promise<unknown> & { [CONTEXT]?: Context };

/**
 * The active context, carried through promises (so through every `await`) by V8's promise
 * hooks, and through `with()`/`bind()` explicitly — but not through timers, `process.nextTick`
 * or I/O callbacks by themselves.
 *
 * Why not the SDK's AsyncLocalStorageContextManager: on Node 20, AsyncLocalStorage enables an
 * async_hooks `init` hook for the whole process as soon as it is first used, and node:http
 * alone makes about a dozen async resources per request (ticks, timers). With tracing at ratio
 * 0.1, 90% of requests are never traced, yet every one of them paid for that hook: about 15% of
 * the redirect path's throughput. Promise hooks cost nothing where no promise is made (a cached
 * redirect makes none) and keep the context across `await`, which is how this service's own
 * code, Kysely, ioredis and fetch continue work.
 *
 * What code that continues work in a raw callback must do (this service's hooks do it): re-enter
 * the context with `context.with()`, or pass the callback through `context.bind()`; the HTTP
 * instrumentation binds its emitters itself.
 */
export class PromiseContextManager extends AbstractAsyncHooksContextManager {
  private current: Context = ROOT_CONTEXT;
  /** Contexts to restore when promise reactions finish, innermost last. */
  private readonly saved: Context[] = [];
  private stopHooks: (() => void) | undefined;

  active(): Context {
    return this.current;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const previous = this.current;
    this.current = context;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = previous;
    }
  }

  enable(): this {
    this.stopHooks ??= promiseHooks.createHook({
      init: (promise) => {
        const current = this.current;
        if (current !== ROOT_CONTEXT) (promise as Tagged)[CONTEXT] = current;
      },
      before: (promise) => {
        this.saved.push(this.current);
        this.current = (promise as Tagged)[CONTEXT] ?? ROOT_CONTEXT;
      },
      after: () => {
        this.current = this.saved.pop() ?? ROOT_CONTEXT;
      },
    }) as () => void;
    return this;
  }

  disable(): this {
    this.stopHooks?.();
    this.stopHooks = undefined;
    this.current = ROOT_CONTEXT;
    this.saved.length = 0;
    return this;
  }
}
