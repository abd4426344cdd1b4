import { rmSync } from 'node:fs';

export default async function globalTeardown() {
  const handle = globalThis.__stepwiseEmbedded;
  if (handle) {
    await handle.stop();
    if (process.env.STEPWISE_TEST_PG_DIR) rmSync(process.env.STEPWISE_TEST_PG_DIR, { recursive: true, force: true });
  }
}
