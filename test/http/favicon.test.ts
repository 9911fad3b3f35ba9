import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';

/** Browsers ask for /favicon.ico on every page load: an icon, never a short code's 422 (issue 16). */
describe('GET /favicon.ico', () => {
  const t = useTestApp(sqlite);

  it('answers an icon, cacheable, whether or not the web client is built', async () => {
    const response = await t.inject({ method: 'GET', url: '/favicon.ico' });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers['content-type']).toBe('image/x-icon');
    expect(response.headers['cache-control']).toBe('public, max-age=86400');
    const body = response.rawPayload;
    // ICO header: reserved 0, type 1 (icon), one image; the image is a PNG.
    expect([...body.subarray(0, 6)]).toEqual([0, 0, 1, 0, 1, 0]);
    expect(body.subarray(22, 26).toString('latin1')).toBe('\x89PNG');
  });

  it('HEAD answers too', async () => {
    expect((await t.inject({ method: 'HEAD', url: '/favicon.ico' })).statusCode).toBe(200);
  });

  it('is not in the OpenAPI document', async () => {
    const document = (await t.inject({ method: 'GET', url: '/openapi.json' })).json<{ paths: object }>();
    expect(Object.keys(document.paths)).not.toContain('/favicon.ico');
  });
});
