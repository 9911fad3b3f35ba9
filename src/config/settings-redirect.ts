import { boolean } from './parsers.js';

/** Settings of the redirect path (issue 13), spread into the settings table after `REDIRECT_CACHE_CONTROL`. */
export const REDIRECT_SETTINGS = {
  REDIRECT_FAST_PATH: {
    default: 'true',
    description:
      '`true`: `GET`/`HEAD /{code}` are answered in front of Fastify (same answer, rate limit, metrics, clicks and sampling decision, less work per request); whatever the fast path cannot answer in full goes through the route. `false`: every request goes through Fastify.',
    parse: boolean,
  },
};
