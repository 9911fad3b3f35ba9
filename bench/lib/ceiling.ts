/**
 * The generator's ceiling: what wrk reaches, pinned as for every target, against a server that
 * does the least possible per request. nginx (one worker, `return` from its config) when it is
 * installed; otherwise the node:net stand-in of bench/ceiling-server.ts, whose ceiling may be
 * lower than wrk's (which can only mark more figures GENERATOR-BOUND, never fewer).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ChildServer, freePort, HOST, node, startServer } from './processes.js';

export type CeilingKind = 'nginx' | 'node:net';

function nginxConfig(dir: string, port: number): string {
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map((kind) => `  ${kind}_temp_path ${join(dir, kind)};`)
    .join('\n');
  return `daemon off;
master_process off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log stderr warn;
events { worker_connections 4096; }
http {
  access_log off;
${temp}
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  server {
    listen ${HOST}:${port};
    location = /health { default_type application/json; return 200 '{"status":"ok"}'; }
    location = /shorten { default_type application/json; return 201 '{"id":1}'; }
    location / { return 302 https://example.com/seeded/0000000?ref=bench; }
  }
}
`;
}

/** Starts the ceiling server on `cores`; `nginx` is its path, or undefined for the stand-in. */
export async function startCeiling(
  nginx: string | undefined,
  dir: string,
  cores: readonly number[],
): Promise<{ server: ChildServer; kind: CeilingKind }> {
  if (nginx === undefined) {
    const server = await startServer('ceiling', node(['--import', 'tsx', 'bench/ceiling-server.ts'], cores), {});
    return { server, kind: 'node:net' };
  }
  const port = await freePort();
  const confDir = join(dir, `nginx-${port}`);
  mkdirSync(confDir, { recursive: true });
  const conf = join(confDir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(confDir, port));
  const command = { command: nginx, args: ['-e', 'stderr', '-p', confDir, '-c', conf], cores };
  return { server: await startServer('ceiling', command, {}, port), kind: 'nginx' };
}
