import type { FastifyPluginAsync } from 'fastify';

/**
 * The site's icon: a 32×32 PNG in an ICO container (247 bytes), a white chain link on blue. Browsers
 * ask for `/favicon.ico` on every page load; without this route the path would be taken for a
 * short code and refused (422).
 */
const FAVICON = Buffer.from(
  'AAABAAEAICAAAAEAIADhAAAAFgAAAIlQTkcNChoKAAAADUlIRFIAAAAgAAAAIAgGAAAAc3p69AAAAKhJREFUeNrtl8sNgDAMQ70MkzE+Q8CdT8GunYJEpJ5qlCcRJw2wi2le1uTBVaQTN0Gqkx8ghgIoH56FDOFI3gMCZ3IFpAuAvbcCOHQxAEYbA3iqB2s1tsgkAGel3+lRYbUuAIfVWnpUWC0C4IKF02rKL4NiHWfhwt1wWNdAbSAtPWNZVLZdehYkHEEPo0RfoKdhojvS4zgxI773KE08zf/N6B3L6cj1fAPbY72LtM1ZGQAAAABJRU5ErkJggg==',
  'base64',
);

/** `GET /favicon.ico`, served by the API process whether or not the web client is built. */
export const faviconRoutes: FastifyPluginAsync = async (app) => {
  app.get('/favicon.ico', { schema: { hide: true }, config: { quietLogs: true } }, (_request, reply) =>
    reply
      .header('content-type', 'image/x-icon')
      .header('cache-control', 'public, max-age=86400')
      .header('x-content-type-options', 'nosniff')
      .send(FAVICON),
  );
};
