import { isDatabaseUnavailable } from '../store/db-errors';
import { GroupCommitter } from '../group-commit';
import type { Db } from '../store/db';
import { getExecutions } from '../store/executions';
import type { ExecutionRecord } from '../store/rows';

/**
 * Reads executions by id, sharing one `id = ANY(...)` query among the reads that arrive together:
 * 10,000 long-polls opened at once cost a handful of queries, not 10,000 pool checkouts.
 */
export function createExecutionReader(db: Db): GroupCommitter<string, ExecutionRecord | undefined> {
  return new GroupCommitter(
    async (ids) => {
      const found = new Map((await getExecutions(db, [...new Set(ids)])).map((e) => [e.id, e]));
      return ids.map((id) => found.get(id));
    },
    isDatabaseUnavailable,
    { maxBatch: 1000 },
  );
}
