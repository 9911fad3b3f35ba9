/** The embedded event bus; its parts (group consumer, leases, recent entries, statements) are in embedded-log/. */
export { EmbeddedLogEventBus, type EmbeddedLogOptions } from './embedded-log/embedded-log-event-bus.js';
