import { type Readable, writable } from 'svelte/store';
import type { operations } from './api-types';

/** Client-side auth state, exactly the fields of spec §2.4. */
export interface AuthState {
  isAuthenticated: boolean | null;
  username: string | null;
  userId: string | null;
  userRole: string | null;
  userEmail: string | null;
  csrfToken: string | null;
  /** When the state was last set (ms since the epoch); a verification is fresh for AUTH_CACHE_MS. */
  timestamp: number;
}

/** Spec §5.7: a successful verification is cached for 30 seconds. */
export const AUTH_CACHE_MS = 30_000;
export const LOGIN_PATH = '/app/login';

type Session = operations['me']['responses'][200]['content']['application/json'];
type Credentials = operations['login']['requestBody'] extends { content: { 'application/json': infer B } } ? B : never;

/** An answer that is not a success, with the server's `detail` text. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

/** The server could not be reached at all (no HTTP answer). */
export class NetworkError extends ApiError {
  constructor() {
    super(0, 'The server cannot be reached. Check your connection and try again.');
    this.name = 'NetworkError';
  }
}

export interface AuthStoreOptions {
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
  /** The address the user is at (path and query), remembered when a 401 sends them to log in. */
  readonly currentAddress: () => string;
  /** Client-side navigation (replacing the current history entry). */
  readonly navigate: (address: string) => void;
}

export interface RequestOptions {
  /** Sent as JSON. */
  readonly json?: unknown;
  /** Sent as it is (a file the user picked), with its media type. */
  readonly body?: { readonly content: BodyInit; readonly type: string };
  /** The media type asked for (`Accept`); JSON unless told. */
  readonly accept?: string;
  readonly signal?: AbortSignal;
}

export interface AuthStore extends Readable<AuthState> {
  /** The state now, without subscribing. */
  current(): AuthState;
  /**
   * Asks the server who is signed in (`GET /api/v1/auth/me`), unless a successful verification is
   * younger than 30 s; `force` bypasses that cache. On a network failure the state is kept as it is.
   */
  verify(options?: { force?: boolean }): Promise<AuthState>;
  login(credentials: Credentials): Promise<AuthState>;
  logout(): Promise<void>;
  /**
   * Every request of the app goes through here: X-CSRF-Token on every non-GET request while a
   * token is held, and any 401 clears the state and goes to the login page, remembering the address.
   * Throws NetworkError when no answer came.
   */
  request(method: string, path: string, options?: RequestOptions): Promise<Response>;
  /** `request`, then the JSON body of a success; an error answer throws ApiError with its detail. */
  requestJson<T>(method: string, path: string, options?: RequestOptions): Promise<T>;
}

export const signedOut = (timestamp: number): AuthState => ({
  isAuthenticated: false,
  username: null,
  userId: null,
  userRole: null,
  userEmail: null,
  csrfToken: null,
  timestamp,
});

const INITIAL: AuthState = { ...signedOut(0), isAuthenticated: null };

/** Where to go back to after login: only addresses inside the app (never another origin). */
export function safeNext(next: string | null | undefined): string | null {
  if (!next || !next.startsWith('/app/') || next.startsWith(LOGIN_PATH)) return null;
  if (/[\\\s]/.test(next)) return null;
  return next;
}

export function loginAddress(next: string): string {
  const back = safeNext(next);
  return back ? `${LOGIN_PATH}?next=${encodeURIComponent(back)}` : LOGIN_PATH;
}

/** The `detail` of an error body, or a fallback naming the status. */
export async function errorDetail(response: Response): Promise<string> {
  try {
    const body: unknown = await response.json();
    if (body && typeof body === 'object' && 'detail' in body && typeof body.detail === 'string') return body.detail;
  } catch {
    // not JSON: fall through
  }
  return `The server answered ${response.status} ${response.statusText}`.trim();
}

export function createAuthStore(options: AuthStoreOptions): AuthStore {
  const fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const now = options.now ?? Date.now;
  const state = writable<AuthState>(INITIAL);
  let current = INITIAL;
  state.subscribe((value) => (current = value));
  let verifying: Promise<AuthState> | null = null;

  const signIn = (session: Session) =>
    state.set({
      isAuthenticated: true,
      username: session.username,
      userId: String(session.id),
      userRole: session.role,
      userEmail: session.email,
      csrfToken: session.csrf_token,
      timestamp: now(),
    });

  const unauthorized = () => {
    state.set(signedOut(now()));
    const here = options.currentAddress();
    // Already on the login page (a wrong password answers 401 too): stay, keeping its `next`.
    if (here.split('?')[0] !== LOGIN_PATH) options.navigate(loginAddress(here));
  };

  async function request(
    method: string,
    path: string,
    { json, body, accept = 'application/json', signal }: RequestOptions = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { accept };
    if (json !== undefined) headers['content-type'] = 'application/json';
    else if (body) headers['content-type'] = body.type;
    const upper = method.toUpperCase();
    if (upper !== 'GET' && current.csrfToken) headers['x-csrf-token'] = current.csrfToken;
    let response: Response;
    try {
      response = await fetchImpl(path, {
        method: upper,
        headers,
        credentials: 'same-origin',
        ...(json !== undefined ? { body: JSON.stringify(json) } : body ? { body: body.content } : {}),
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      if (error instanceof DOMException && error.name === 'AbortError') throw error;
      throw new NetworkError();
    }
    if (response.status === 401) unauthorized();
    return response;
  }

  async function requestJson<T>(method: string, path: string, requestOptions?: RequestOptions): Promise<T> {
    const response = await request(method, path, requestOptions);
    if (!response.ok) throw new ApiError(response.status, await errorDetail(response));
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  async function askServer(): Promise<AuthState> {
    let response: Response;
    try {
      response = await request('GET', '/api/v1/auth/me');
    } catch {
      return current; // network failure: keep the cached state (spec §5.7)
    }
    // 401 has cleared the state already; any other failure says nothing about the session.
    if (response.ok) signIn((await response.json()) as Session);
    return current;
  }

  return {
    subscribe: state.subscribe,
    current: () => current,
    request,
    requestJson,

    verify({ force = false } = {}) {
      if (!force && current.isAuthenticated === true && now() - current.timestamp < AUTH_CACHE_MS) {
        return Promise.resolve(current);
      }
      verifying ??= askServer().finally(() => (verifying = null));
      return verifying;
    },

    async login(credentials) {
      const response = await request('POST', '/api/v1/auth/login', { json: credentials });
      if (!response.ok) throw new ApiError(response.status, await errorDetail(response));
      signIn((await response.json()) as Session);
      return current;
    },

    async logout() {
      try {
        await request('POST', '/api/v1/auth/logout');
      } finally {
        state.set(signedOut(now()));
        options.navigate(LOGIN_PATH);
      }
    },
  };
}
