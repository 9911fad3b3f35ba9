import { outgoingTraceHeaders } from '../telemetry/context-propagation.js';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { NotificationChannel, NotificationRequested } from '../../domain/notification.js';
import type { NotificationSender } from '../../ports/notification-sender.js';
import { assertAllowedLiteral, guardedLookup } from './destination-guard.js';

export interface HttpSenderOptions {
  readonly timeoutMs: number;
  /** Lets notifications reach loopback and private addresses (tests, internal receivers). */
  readonly allowPrivate: boolean;
}

export class DeliveryError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'DeliveryError';
  }
}

const BASE_HEADERS = { 'content-type': 'application/json', 'user-agent': 'UrlShortener-Notifier/0.1' } as const;

/**
 * POSTs a JSON body and succeeds on a 2xx answer only. Redirects are not followed (a 3xx is a
 * failure), the whole exchange has a deadline, and the address dialled passes the SSRF guard.
 */
export function postJson(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: HttpSenderOptions,
): Promise<number> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    if (!options.allowPrivate) {
      try {
        assertAllowedLiteral(target); // an IP literal is dialled without `lookup`
      } catch (error) {
        reject(error as Error);
        return;
      }
    }
    let settled = false;
    const settle = (error: Error | undefined, status = 0) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      if (error) {
        request.destroy();
        reject(error);
      } else {
        resolve(status);
      }
    };
    const request = client.request(
      target,
      {
        method: 'POST',
        headers: { ...BASE_HEADERS, 'content-length': Buffer.byteLength(body), ...outgoingTraceHeaders(), ...headers },
        ...(options.allowPrivate ? {} : { lookup: guardedLookup }),
      },
      (response) => {
        response.resume(); // the body is not needed; drain it so the socket is freed
        const status = response.statusCode ?? 0;
        response.once('end', () =>
          status >= 200 && status < 300
            ? settle(undefined, status)
            : settle(new DeliveryError(`Receiver answered ${status}`, status)),
        );
        response.once('error', settle);
      },
    );
    // One deadline for the whole exchange (connect, answer, body): a socket idle timeout alone
    // lets a receiver that trickles bytes hold the sender, and its partition, for ever.
    const deadline = setTimeout(
      () => settle(new DeliveryError(`No answer within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
    request.once('error', settle);
    request.end(body);
  });
}

/** Standard Webhooks headers: `webhook-signature` is `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`. */
export function standardWebhookHeaders(secret: string, id: string, body: string, now = Date.now()) {
  const timestamp = String(Math.floor(now / 1000));
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` };
}

/** What the chat message says of the execution that ended. */
interface ExecutionOutcomeSummary {
  readonly status: string;
  readonly duration_ms?: number;
  readonly error?: string | null;
}

function chatText(request: NotificationRequested): string {
  const outcome = request.cause.payload as ExecutionOutcomeSummary;
  const status = outcome.status.replace('_', ' ');
  const duration = outcome.duration_ms === undefined ? '' : ` in ${outcome.duration_ms} ms`;
  const error = outcome.error ? `: ${outcome.error}` : '';
  return `Execution ${request.execution_id} ${status}${duration}${error}`;
}

/**
 * Notifications over HTTP: a webhook channel gets the cause as a Standard Webhooks message signed
 * with its secret; a chat channel gets `{"text": "Execution … completed in 12 ms"}`.
 */
export class HttpNotificationSender implements NotificationSender {
  constructor(private readonly options: HttpSenderOptions) {}

  async send(channel: NotificationChannel, request: NotificationRequested): Promise<void> {
    if (channel.type === 'webhook') {
      const body = JSON.stringify({
        type: request.cause.event_type,
        timestamp: new Date().toISOString(),
        data: request.cause.payload,
      });
      const headers = standardWebhookHeaders(channel.secret ?? '', request.notification_id, body);
      await postJson(channel.url, body, headers, this.options);
    } else {
      await postJson(channel.url, JSON.stringify({ text: chatText(request) }), {}, this.options);
    }
  }
}
