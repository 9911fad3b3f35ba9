import formbody from '@fastify/formbody';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  EMAIL_MAX_LENGTH,
  EMAIL_PATTERN,
  PASSWORD_MAX_BYTES,
  ROLES,
  USERNAME_MAX_LENGTH,
  USERNAME_MIN_LENGTH,
  USERNAME_PATTERN,
  type User,
} from '../../domain/user.js';
import type { AuthService } from '../../services/auth-service.js';
import { errorResponse } from '../schemas.js';
import {
  ACCESS_TOKEN_COOKIE,
  clearSessionCookies,
  CSRF_COOKIE,
  setCsrfCookie,
  setSessionCookies,
} from '../plugins/session-cookies.js';

export interface AuthRoutesOptions {
  readonly auth: AuthService;
}

const tags = ['auth'];
const Role = Type.Union([Type.Literal(ROLES[0]), Type.Literal(ROLES[1])]);

const RegisterBody = Type.Object(
  {
    username: Type.String({
      minLength: USERNAME_MIN_LENGTH,
      maxLength: USERNAME_MAX_LENGTH,
      pattern: USERNAME_PATTERN,
      description: '3 to 32 of letters, digits, `_`, `.`, `-`. Case-sensitive at login; unique in any case.',
    }),
    email: Type.String({
      maxLength: EMAIL_MAX_LENGTH,
      pattern: EMAIL_PATTERN,
      description: 'Stored lower-case; unique.',
    }),
    // Length rules answer 400 (spec §5.6), so they are checked by the service, not here.
    password: Type.String({
      description: `At least \`password_min_length\` characters (default 8), at most ${PASSWORD_MAX_BYTES} UTF-8 bytes.`,
    }),
  },
  { additionalProperties: false },
);

const RegisteredUser = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  email: Type.String(),
  role: Role,
  created_at: Type.String({ format: 'date-time' }),
});

const SessionUser = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  email: Type.String(),
  role: Role,
  csrf_token: Type.String({ description: 'Send it back in `X-CSRF-Token` on every non-GET request under /api/.' }),
});

const credentials = {
  username: Type.String({ minLength: 1, maxLength: 256 }),
  password: Type.String({ maxLength: 4096 }),
};
const LoginJson = Type.Object(credentials, { additionalProperties: false });
/** The OAuth2 password grant's form fields; only username and password are used. */
const LoginForm = Type.Object(
  {
    ...credentials,
    grant_type: Type.Optional(Type.String({ pattern: '^password$' })),
    scope: Type.Optional(Type.String()),
    client_id: Type.Optional(Type.String()),
    client_secret: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

const sessionView = (user: User, csrfToken: string) => ({
  id: user.id,
  username: user.username,
  email: user.email,
  role: user.role,
  csrf_token: csrfToken,
});

const registerSchema = {
  operationId: 'register',
  summary: 'Create a user account',
  tags,
  body: RegisterBody,
  response: {
    201: { ...RegisteredUser, description: 'The account was created.' },
    400: errorResponse('`Password must be at least {min_len} characters`, or at most 72 bytes.'),
    403: errorResponse('`Cross-site request refused: …`: sent by a page on another site (`Sec-Fetch-Site`, `Origin`).'),
    409: errorResponse('`Username already registered` or `User already exists` (the email).'),
    415: errorResponse('The body is not JSON.'),
    422: errorResponse('The body breaks a field rule.'),
  },
};

const loginSchema = {
  operationId: 'login',
  summary: 'Log in and receive the session cookies',
  description:
    'JSON `{username, password}` or the OAuth2 password form. Sets `access_token` (httpOnly) and `csrf_token`. ' +
    'After `max_login_attempts` failures within `lockout_duration_minutes`, answers 423 until that long after the last failure.',
  tags,
  body: {
    content: {
      'application/json': { schema: LoginJson },
      'application/x-www-form-urlencoded': { schema: LoginForm },
    },
  },
  response: {
    200: { ...SessionUser, description: 'Logged in; both cookies are set.' },
    401: errorResponse('`Invalid username or password`.'),
    403: errorResponse('`Cross-site request refused: …`: sent by a page on another site (`Sec-Fetch-Site`, `Origin`).'),
    415: errorResponse('The body is neither JSON nor a form.'),
    422: errorResponse('The body breaks a field rule.'),
    423: errorResponse('`Account locked due to too many failed attempts`; `Retry-After` gives the seconds left.'),
    429: errorResponse(
      '`Too many failed logins from this address; try again later` (LOGIN_ADDRESS_MAX_FAILURES), or the rate limit; `Retry-After` gives the seconds left.',
    ),
  },
};

const logoutSchema = {
  operationId: 'logout',
  summary: 'Log out: revoke the token on every instance and clear the cookies',
  tags,
  response: {
    200: Type.Object({ message: Type.String() }, { description: 'Logged out (also when no session was open).' }),
    403: errorResponse('`Cross-site request refused: …`: sent by a page on another site (`Sec-Fetch-Site`, `Origin`).'),
  },
};

const meSchema = {
  operationId: 'me',
  summary: 'The signed-in user and the session CSRF token',
  tags,
  response: {
    200: { ...SessionUser, description: 'The signed-in user.' },
    401: errorResponse('`Not authenticated`.'),
  },
};

/** `POST /register`, `POST /login`, `POST /logout`, `GET /me` under `/api/v1/auth`. */
export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, { auth }) => {
  app.post('/register', { schema: registerSchema }, async (request, reply) => {
    const user = await auth.register(request.body);
    const { id, username, email, role, created_at } = user;
    return reply.code(201).send({ id, username, email, role, created_at });
  });

  // The form parser lives in this scope only: every other route still answers 415 to a form.
  await app.register(async (login) => {
    await login.register(formbody, { bodyLimit: 16 * 1024 });
    login.post('/login', { schema: loginSchema }, async (request, reply) => {
      const { username, password } = request.body as { username: string; password: string };
      const result = await auth.login(username, password, request.ip);
      setSessionCookies(reply, result.accessToken, result.csrfToken, auth.sessionSeconds);
      return sessionView(result.user, result.csrfToken);
    });
  });

  app.post('/logout', { schema: logoutSchema }, async (request, reply) => {
    await auth.logout(request.cookies[ACCESS_TOKEN_COOKIE] || undefined);
    clearSessionCookies(reply);
    return { message: 'Logged out' };
  });

  app.get('/me', { config: { auth: 'user' }, schema: meSchema }, async (request, reply) => {
    const session = request.session!;
    const csrf = auth.csrfTokenFor(session, request.cookies[CSRF_COOKIE]);
    // A lost or stale CSRF cookie is replaced, for the rest of the session's lifetime.
    if (csrf.renewed) setCsrfCookie(reply, csrf.token, csrf.maxAgeSeconds);
    return sessionView(session.user, csrf.token);
  });
};
