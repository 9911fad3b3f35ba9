import { existsSync } from 'node:fs';
import { extname, join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { errors } from '../../domain/errors.js';
import { PACKAGE_ROOT } from '../../support/package-root.js';

/** `web/dist`, where `npm run build` puts the web client. */
export const WEB_DIST = join(PACKAGE_ROOT, 'web', 'dist');

export interface WebAppRoutesOptions {
  /** The built client; `WEB_DIST` unless a test points elsewhere. */
  readonly root?: string;
}

const hidden = { schema: { hide: true } } as const;
// Vite names every asset after its content hash, so an asset never changes; index.html always may.
const IMMUTABLE = 'public, max-age=31536000, immutable';
const REVALIDATE = 'no-cache';
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
} as const;

/**
 * The web client (design §3): `/` redirects to `/app/`, files of `web/dist` are served under
 * `/app/`, and every other `/app/…` path without a file extension is a client-side route that gets
 * `index.html`. `app` has 3 letters, so it can never be a short code.
 */
export const webAppRoutes: FastifyPluginAsync<WebAppRoutesOptions> = async (app, { root = WEB_DIST }) => {
  app.get('/', hidden, (_request, reply) => reply.redirect('/app/', 302));
  app.get('/app', hidden, (_request, reply) => reply.redirect('/app/', 302));

  if (!existsSync(join(root, 'index.html'))) {
    app.get('/app/*', hidden, async () => {
      throw errors.webClientNotBuilt();
    });
    return;
  }

  await app.register(fastifyStatic, {
    root,
    serve: false,
    index: false,
    dotfiles: 'deny',
    cacheControl: false,
    setHeaders: (reply, path) => {
      void reply.header('cache-control', path.endsWith('index.html') ? REVALIDATE : IMMUTABLE);
    },
  });
  const sendIndex = (reply: FastifyReply) => reply.headers(SECURITY_HEADERS).sendFile('index.html');

  app.get<{ Params: { '*': string } }>('/app/*', hidden, (request, reply) => {
    const path = request.params['*'];
    // A path with an extension names a file (404 when missing); anything else is a page of the app.
    if (extname(path) === '') return sendIndex(reply);
    return reply.header('x-content-type-options', 'nosniff').sendFile(path);
  });
};
