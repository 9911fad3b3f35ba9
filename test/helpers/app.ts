import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { compose, type Service } from '../../src/composition/compose.js';
import type { LoggerChoice } from '../../src/composition/logger.js';
import { AUTH_TEST_ENV, login, ManualClock, type Session, signUp } from './auth.js';
import { type Backend, type TestDatabase, testConfig } from './backends.js';
import { lazy } from './lazy.js';
import { NATS_URL } from './services.js';

export type Env = Readonly<Record<string, string>>;

/** An administrator the service creates at start from its `ADMIN_*` settings. */
export interface AdminAccount {
  readonly username: string;
  readonly email: string;
  readonly password: string;
}

/** The `ADMIN_*` settings that make the service create `admin` at start. */
export function adminEnv(admin: AdminAccount) {
  return { ADMIN_USERNAME: admin.username, ADMIN_EMAIL: admin.email, ADMIN_PASSWORD: admin.password };
}

export interface TestAppOptions {
  /**
   * The account suites' settings: fast bcrypt (`AUTH_TEST_ENV`) and a clock the test moves by hand
   * (`clock`, a new one unless given).
   */
  readonly accounts?: boolean;
  /** A clock the test moves by hand, e.g. one shared by two instances; the system clock unless given. */
  readonly clock?: ManualClock;
  /** A database to share with another instance; by default a fresh one, dropped on close. */
  readonly database?: TestDatabase;
  /** An administrator created at start and logged in once the app is ready: `admin` is its session. */
  readonly admin?: AdminAccount;
  readonly settingsPollIntervalMs?: number;
  /**
   * On the shared NATS server under this stream prefix (`uniqueNatsPrefix`), instead of the
   * embedded bus; the prefix's streams are deleted at close.
   */
  readonly natsPrefix?: string;
  /** Fastify's logger; none unless given. */
  readonly logger?: LoggerChoice;
  /** Besides the backend's own availability: whatever else the suite needs (Redis, NATS) is there. */
  readonly when?: boolean;
}

/** The whole service on a test database, for `inject()`. */
export interface TestApp {
  readonly service: Service;
  readonly app: FastifyInstance;
  /** The app's `inject`, so that the handle stands wherever an app is injected into. */
  readonly inject: FastifyInstance['inject'];
  readonly database: TestDatabase;
  /** The manual clock of an app started with `accounts` or a `clock`. */
  readonly clock: ManualClock;
  /** The session of `options.admin`. */
  readonly admin: Session;
  /** Stops the service and drops its own database; a second call does nothing. */
  close(): Promise<void>;
}

/** The handle `useTestApp` returns: a `TestApp` once the suite's `beforeAll` has started it. */
export interface SuiteTestApp extends TestApp {
  /** Whether the app runs (its backend and `options.when` were available). */
  readonly running: boolean;
  /** A new user signed up and logged in once the app has started (suite order): its session. */
  user(prefix: string): Session;
}

type Started = Omit<TestApp, 'inject' | 'clock' | 'admin' | 'close'> & {
  readonly clock?: ManualClock;
  readonly admin?: Session;
};

/** The service on a fresh database of `backend` (or `options.database`); the caller closes it. */
export async function startTestApp(backend: Backend, env: Env = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const accounts = options.accounts === true;
  const clock = options.clock ?? (accounts ? new ManualClock() : undefined);
  const database = options.database ?? (await backend.create());
  const settings = {
    ...(accounts ? AUTH_TEST_ENV : {}),
    ...(options.admin ? adminEnv(options.admin) : {}),
    ...(options.natsPrefix ? { NATS_URL, NATS_PREFIX: options.natsPrefix } : {}),
    ...env,
  };
  const service = await compose(testConfig(database.databaseUrl, settings), {
    logger: options.logger ?? false,
    clock,
    settingsPollIntervalMs: options.settingsPollIntervalMs,
  });
  await service.app.ready();
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      if (options.natsPrefix) await (service.events.bus as NatsEventBus).destroy();
      await service.close();
      if (!options.database) await database.drop();
    })());
  const admin = options.admin && (await login(service.app, options.admin.username, options.admin.password));
  return handle({ service, app: service.app, database, clock, admin }, close);
}

/**
 * The service for a suite: started in a `beforeAll` of the suite this is called in (when
 * `backend.available` and `options.when`), closed in its `afterAll`. The handle is read lazily, so
 * tests use it as they would the started app. `env` may be a function, read at start, for settings
 * that earlier hooks of the suite make (a server's address).
 */
export function useTestApp(backend: Backend, env: Env | (() => Env) = {}, options: TestAppOptions = {}): SuiteTestApp {
  const enabled = backend.available && options.when !== false;
  let started: TestApp | undefined;
  beforeAll(async () => {
    if (enabled) started = await startTestApp(backend, typeof env === 'function' ? env() : env, options);
  });
  afterAll(async () => {
    await started?.close();
  });
  const current = () => {
    if (!started) throw new Error(`the ${backend.name} test app is not running (not available, or not started yet)`);
    return started;
  };
  const suite = {
    get running() {
      return started !== undefined;
    },
    service: lazy(() => current().service),
    // Read when used, so that a suite can name it before its `beforeAll` has logged in.
    admin: sessionView(() => started?.admin, 'the administrator'),
    close: () => current().close(),
    user(prefix: string) {
      let session: Session | undefined;
      beforeAll(async () => {
        if (started) session = (await signUp(started.app, prefix)).session;
      });
      return sessionView(() => session, `user ${prefix}`);
    },
  } as SuiteTestApp;
  defineReadThrough(suite, ['app', 'inject', 'database', 'clock'], current);
  return suite;
}

/**
 * Starts apps inside tests (`startTestApp`'s arguments) and closes each after the test (`each`)
 * or after the suite (`all`).
 */
export function useTestApps(scope: 'each' | 'all' = 'all') {
  const running: TestApp[] = [];
  (scope === 'each' ? afterEach : afterAll)(async () => {
    for (const app of running.splice(0)) await app.close();
  });
  return async (...args: Parameters<typeof startTestApp>): Promise<TestApp> => {
    const app = await startTestApp(...args);
    running.push(app);
    return app;
  };
}

function handle(started: Started, close: () => Promise<void>): TestApp {
  const { app, clock, admin } = started;
  return {
    ...started,
    inject: app.inject.bind(app) as FastifyInstance['inject'],
    get clock() {
      if (!clock) throw new Error('this test app runs on the system clock: start it with `accounts` or a `clock`');
      return clock;
    },
    get admin() {
      if (!admin) throw new Error('this test app has no administrator: start it with `admin`');
      return admin;
    },
    close,
  };
}

/** A session whose fields are read from `read()` when used (and spread, unlike a proxy's). */
function sessionView(read: () => Session | undefined, what: string): Session {
  const view = {} as Session;
  defineReadThrough(view, ['accessToken', 'csrfToken', 'cookie', 'headers'], () => {
    const session = read();
    if (!session) throw new Error(`${what} has no session (the test app is not running)`);
    return session;
  });
  return view;
}

/** Defines each of `keys` on `target` as a getter of that key of `read()`, read at the time of use. */
function defineReadThrough<T>(target: T, keys: readonly (keyof T)[], read: () => T): void {
  for (const key of keys) Object.defineProperty(target, key, { get: () => read()[key], enumerable: true });
}
