import { rmSync } from 'node:fs';
import path from 'node:path';

export default async function globalTeardown() {
  const handle = globalThis.__stepwiseEmbedded;
  if (handle) {
    await handle.stop();
    const tmp = process.env.STEPWISE_TEST_PG_DIR;
    const data = process.env.STEPWISE_TEST_PG_DATA;
    if (tmp) rmSync(tmp, { recursive: true, force: true });
    // Placed elsewhere (root, with a TMPDIR the server's user cannot reach): its folder goes too.
    if (data && tmp && !data.startsWith(tmp + path.sep)) rmSync(path.dirname(data), { recursive: true, force: true });
  }
}
