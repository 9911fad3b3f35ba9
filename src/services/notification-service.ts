import { errors } from '../domain/errors.js';
import { uuidv7 } from '../domain/events.js';
import { type ChannelType, newWebhookSecret, type NotificationChannel } from '../domain/notification.js';
import type { DestinationGuard } from '../ports/destination-guard.js';
import type { NotificationRepository } from '../ports/notification-repository.js';
import type { Caller } from './execution-service.js';

const URL_MAX_LENGTH = 2048;
const channelNotFound = errors.channelNotFound;

export type ChannelView = Omit<NotificationChannel, 'user_id' | 'secret'>;

/** Users' notification channels: create (the webhook secret is shown once), list, delete. */
export class NotificationService {
  constructor(
    private readonly repository: NotificationRepository,
    private readonly destinations: DestinationGuard,
    private readonly options: { readonly allowPrivate: boolean; readonly maxChannelsPerUser: number },
  ) {}

  /** 409 when the caller has `maxChannelsPerUser` channels already (counted with every instance's creations). */
  async create(
    caller: Caller,
    input: { type: ChannelType; name: string; url: string },
  ): Promise<ChannelView & { secret?: string }> {
    const url = parseDestination(input.url);
    if (!this.options.allowPrivate) {
      const verdict = await this.destinations.check(url);
      if (!verdict.allowed) throw errors.validation(`body: 'url' ${verdict.detail}`);
    }
    const secret = input.type === 'webhook' ? newWebhookSecret() : null;
    const limit = this.options.maxChannelsPerUser;
    const channel = await this.repository.createChannel(
      { id: uuidv7(), user_id: caller.userId, type: input.type, name: input.name, url: input.url, secret },
      limit,
    );
    if (!channel) throw errors.tooManyChannels(limit);
    return { ...view(channel), ...(secret ? { secret } : {}) };
  }

  async list(caller: Caller): Promise<ChannelView[]> {
    return (await this.repository.listChannels(caller.userId)).map(view);
  }

  async delete(caller: Caller, id: string): Promise<void> {
    if (!(await this.repository.deleteChannel(caller.userId, id))) throw channelNotFound();
  }
}

function view(channel: NotificationChannel): ChannelView {
  const { user_id: _user, secret: _secret, ...rest } = channel;
  return rest;
}

function parseDestination(text: string): URL {
  if (text.length > URL_MAX_LENGTH) throw errors.validation(`body: 'url' must be at most ${URL_MAX_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw errors.validation(`body: 'url' must be an absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw errors.validation(`body: 'url' scheme must be http or https`);
  }
  return url;
}
