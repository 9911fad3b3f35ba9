import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as the OTLP/HTTP JSON encoding carries it, with its resource's `service.name`. */
export interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: readonly { key: string; value: Record<string, unknown> }[];
  readonly service: string;
}

export const SPAN_KIND = { server: 2, client: 3, producer: 4, consumer: 5 } as const;

/** A bare OTLP/HTTP (JSON) trace receiver on 127.0.0.1: keeps every span posted to /v1/traces. */
export class OtlpReceiver {
  readonly spans: OtlpSpan[] = [];
  posts = 0;
  private readonly server = http.createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      if (request.method === 'POST' && request.url === '/v1/traces') {
        this.posts++;
        this.collect(JSON.parse(body));
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else {
        response.writeHead(404).end();
      }
    });
  });

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  clear(): void {
    this.spans.length = 0;
    this.posts = 0;
  }

  private collect(payload: {
    resourceSpans: {
      resource: { attributes: OtlpSpan['attributes'] };
      scopeSpans: { spans: Omit<OtlpSpan, 'service'>[] }[];
    }[];
  }): void {
    for (const resourceSpans of payload.resourceSpans) {
      const service = String(
        resourceSpans.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '',
      );
      for (const scope of resourceSpans.scopeSpans)
        for (const span of scope.spans) this.spans.push({ ...span, service });
    }
  }
}

/** The value of a span attribute, whatever its OTLP type. */
export function spanAttribute(span: OtlpSpan, key: string): unknown {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : Object.values(value)[0];
}
