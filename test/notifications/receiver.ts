import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request as a receiver saw it. */
export interface Received {
  readonly path: string;
  readonly method: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  readonly at: number;
  /** Resolves when the client closed the connection (for requests left unanswered). */
  readonly closed: Promise<void>;
}

/** What the receiver does with the n-th request (1-based) to a path. */
export type Answer = { status: number; location?: string } | 'hang';
export type Behaviour = (n: number) => Answer;

/**
 * A real HTTP receiver on 127.0.0.1: records every request and answers per path as told
 * (default 200). `hang` never answers; the test sees when the client gives up.
 */
export class Receiver {
  readonly requests: Received[] = [];
  private readonly behaviours = new Map<string, Behaviour>();
  private readonly sockets = new Set<Socket>();
  private readonly server = http.createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const path = request.url ?? '';
      const closed = new Promise<void>((resolve) => response.once('close', () => resolve()));
      this.requests.push({
        path,
        method: request.method ?? '',
        headers: request.headers,
        body,
        at: Date.now(),
        closed,
      });
      const n = this.requests.filter((r) => r.path === path).length;
      const answer: Answer = (this.behaviours.get(path) ?? (() => ({ status: 200 })))(n);
      if (answer === 'hang') return;
      response.writeHead(answer.status, answer.location ? { location: answer.location } : {}).end('{}');
    });
  });

  constructor() {
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  on(path: string, behaviour: Behaviour): void {
    this.behaviours.set(path, behaviour);
  }

  to(path: string): Received[] {
    return this.requests.filter((r) => r.path === path);
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Standard Webhooks verification, written from the scheme (not from the service's code):
 * `webhook-signature` holds space-separated `v1,<base64 HMAC-SHA256>` entries over
 * `${webhook-id}.${webhook-timestamp}.${body}`, keyed with the base64-decoded secret after `whsec_`.
 */
export function verifyStandardWebhook(secret: string, headers: http.IncomingHttpHeaders, body: string): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  if (!secret.startsWith('whsec_')) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  return signatures.split(' ').some((entry) => {
    const [version, signature] = entry.split(',');
    if (version !== 'v1' || signature === undefined) return false;
    const given = Buffer.from(signature, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}
