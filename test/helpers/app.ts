import { compose, type Service } from '../../src/composition/compose.js';
import type { Backend, TestDatabase } from './backends.js';
import { testConfig } from './backends.js';

export interface TestApp {
  readonly service: Service;
  readonly database: TestDatabase;
  close(): Promise<void>;
}

/** The whole service on a fresh database of `backend`, for `app.inject()`. */
export async function startTestApp(backend: Backend, env: Record<string, string> = {}): Promise<TestApp> {
  const database = await backend.create();
  const service = await compose(testConfig(database.databaseUrl, env), { logger: false });
  await service.app.ready();
  return {
    service,
    database,
    close: async () => {
      await service.close();
      await database.drop();
    },
  };
}
