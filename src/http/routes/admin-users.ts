import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ROLES, type User } from '../../domain/user.js';
import type { RuntimeSettings } from '../../services/runtime-settings.js';
import type { UserAdminService } from '../../services/user-admin-service.js';
import { errorResponse, oneOf, rowId } from '../schemas.js';

export interface AdminUserRoutesOptions {
  readonly userAdmin: UserAdminService;
  readonly settings: RuntimeSettings;
}

const tags = ['admin'];

const AdminUser = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  email: Type.String(),
  role: oneOf(ROLES),
  disabled: Type.Boolean({ description: 'Disabled: no login; its sessions and API keys are refused.' }),
  locked: Type.Boolean({ description: 'Locked out by failed logins right now.' }),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});

const IdParams = Type.Object({ id: rowId(1) });
const adminOnly = {
  401: errorResponse('`Not authenticated`.'),
  403: errorResponse('`Admin privileges required`, or a CSRF failure.'),
};
const notFound = errorResponse('`User not found`.');

const listSchema = {
  operationId: 'list_users',
  summary: 'Users, by id, searchable',
  description:
    'One page of at most `limit` users; a `Link: <…&after=ID>; rel="next"` header points at the next one while more exist.',
  tags,
  querystring: Type.Object(
    {
      q: Type.Optional(Type.String({ maxLength: 254, description: 'Substring of the username or email, any case.' })),
      limit: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
      after: Type.Optional(rowId(0)),
    },
    { additionalProperties: false },
  ),
  response: { 200: Type.Array(AdminUser, { description: 'The users.' }), ...adminOnly },
};

const getSchema = {
  operationId: 'get_user',
  summary: 'One user',
  tags,
  params: IdParams,
  response: { 200: { ...AdminUser, description: 'The user.' }, ...adminOnly, 404: notFound },
};

const changeSchema = {
  operationId: 'update_user',
  summary: 'Change a role, disable or enable an account',
  description:
    "Disabling refuses the user's sessions and API keys at once on every instance; it also ends the sessions open then for good; enabling brings the API keys back, not those sessions. The last enabled administrator can be neither demoted nor disabled: 409.",
  tags,
  params: IdParams,
  body: Type.Object(
    { role: Type.Optional(oneOf(ROLES)), disabled: Type.Optional(Type.Boolean()) },
    { additionalProperties: false },
  ),
  response: {
    200: { ...AdminUser, description: 'The user as it is now.' },
    ...adminOnly,
    404: notFound,
    409: errorResponse('`Cannot remove the last administrator`.'),
    415: errorResponse('The body is not JSON.'),
    422: errorResponse('An unknown field or role.'),
  },
};

const unlockSchema = {
  operationId: 'unlock_user',
  summary: "Lift the user's login lockout",
  description: 'Forgets the failed logins: the next attempt is checked again at once.',
  tags,
  params: IdParams,
  response: { 200: { ...AdminUser, description: 'The user, unlocked.' }, ...adminOnly, 404: notFound },
};

/** `/users` under `/api/v1/admin`: list, read, change and unlock accounts (administrators). */
export const adminUserRoutes: FastifyPluginAsyncTypebox<AdminUserRoutesOptions> = async (
  app,
  { userAdmin, settings },
) => {
  const config = { auth: 'admin' } as const;
  const view = async (user: User) => ({
    id: user.id,
    username: user.username,
    email: user.email,
    role: user.role,
    disabled: user.disabled,
    locked: await userAdmin.locked(user, settings.current().max_login_attempts),
    created_at: user.created_at,
    updated_at: user.updated_at,
  });

  app.get('/users', { config, schema: listSchema }, async (request, reply) => {
    const { q, limit, after } = request.query;
    const page = await userAdmin.list({ q, limit, after });
    if (page.nextAfter !== undefined) {
      const query = new URLSearchParams({ ...(q ? { q } : {}), limit: String(limit), after: String(page.nextAfter) });
      void reply.header('link', `</api/v1/admin/users?${query.toString()}>; rel="next"`);
    }
    return Promise.all(page.items.map(view));
  });
  app.get('/users/:id', { config, schema: getSchema }, async (request) => view(await userAdmin.get(request.params.id)));
  app.patch('/users/:id', { config, schema: changeSchema }, async (request) =>
    view(await userAdmin.change(request.params.id, request.body)),
  );
  app.post('/users/:id/unlock', { config, schema: unlockSchema }, async (request) =>
    view(await userAdmin.unlock(request.params.id)),
  );
};
