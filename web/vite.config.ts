import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vitest/config';

/** The API process serves `dist/` under `/app/`; `npm run dev` proxies the API to a local service. */
const api = process.env.API_URL ?? 'http://127.0.0.1:8000';

export default defineConfig({
  base: '/app/',
  plugins: [svelte()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
  server: {
    proxy: Object.fromEntries(
      ['/api', '/shorten', '/urls', '/execute', '/health'].map((path) => [path, { target: api, changeOrigin: false }]),
    ),
  },
  test: { include: ['test/**/*.test.ts'], environment: 'node' },
});
