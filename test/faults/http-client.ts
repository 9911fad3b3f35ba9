/**
 * A small HTTP client for the load driver: keep-alive connections per target, a deadline per
 * request, and the outcome as a value (a status, or the error when no answer came).
 */
import http from 'node:http';

export interface Answer {
  /** The status, or null when no answer came (connection refused or reset, deadline passed). */
  readonly status: number | null;
  readonly body: string;
  readonly headers: http.IncomingHttpHeaders;
  /** Why no answer came. */
  readonly error?: string;
}

export interface RequestOptions {
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
  readonly timeoutMs?: number;
}

export class HttpClient {
  private readonly agents = new Map<string, http.Agent>();

  constructor(private readonly maxSockets = 64) {}

  private agent(origin: string): http.Agent {
    let agent = this.agents.get(origin);
    if (!agent) {
      // Idle sockets are dropped after 2 s, before the server's keep-alive limit (5 s) could close one as it is reused.
      agent = new http.Agent({ keepAlive: true, maxSockets: this.maxSockets, timeout: 2000 });
      this.agents.set(origin, agent);
    }
    return agent;
  }

  request(base: string, method: string, path: string, options: RequestOptions = {}): Promise<Answer> {
    const url = new URL(path, base);
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string> = { ...options.headers };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve) => {
      let settled = false;
      const settle = (answer: Answer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(answer);
      };
      const req = http.request(url, { method, headers, agent: this.agent(url.origin) }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => settle({ status: res.statusCode ?? null, body, headers: res.headers }));
        res.on('error', (error) => settle({ status: null, body, headers: {}, error: error.message }));
      });
      const timer = setTimeout(() => {
        settle({ status: null, body: '', headers: {}, error: `no answer within ${options.timeoutMs} ms` });
        req.destroy();
      }, options.timeoutMs ?? 30_000);
      req.on('error', (error: NodeJS.ErrnoException) =>
        settle({ status: null, body: '', headers: {}, error: error.code ?? error.message }),
      );
      req.end(payload);
    });
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}
