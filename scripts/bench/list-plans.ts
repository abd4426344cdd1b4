// How PostgreSQL runs the list statement (src/store/executions.ts) for a filter: the plan of the very
// statement GET /executions sends, run with EXPLAIN ANALYZE.
import type { Db } from '../../src/store/db';
import { listStatement, type ListFilter } from '../../src/store/executions';

export interface ListPlan {
  /** The index the filter is meant to be served by. */
  intended: string;
  intendedUsed: boolean;
  /** Every index the plan reads, in plan order, once each. */
  indexes: string[];
  seqScan: boolean;
  /** EXPLAIN ANALYZE's execution time (planning excluded), in ms. */
  executionMs: number;
  planningMs: number;
}

type PlanNode = { 'Node Type'?: string; 'Index Name'?: string; 'Relation Name'?: string; Plans?: PlanNode[] };

function collect(node: PlanNode, indexes: string[], types: string[]): void {
  // The maintained counts' tables are a few rows each, read whole: only a scan of the executions counts.
  if (node['Node Type'] && (node['Node Type'] !== 'Seq Scan' || node['Relation Name'] === 'executions')) types.push(node['Node Type']);
  if (node['Index Name'] && !indexes.includes(node['Index Name'])) indexes.push(node['Index Name']);
  for (const child of node.Plans ?? []) collect(child, indexes, types);
}

/** Runs the first page (50, newest first) of a filtered list under EXPLAIN (ANALYZE, FORMAT JSON). */
export async function explainList(db: Db, filter: Omit<ListFilter, 'limit' | 'offset' | 'order'>, intended: string): Promise<ListPlan> {
  const { sql, bindings } = listStatement({ ...filter, limit: 50, offset: 0, order: 'desc' });
  const { rows } = (await db.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, bindings as never)) as { rows: Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode; 'Execution Time': number; 'Planning Time': number }> }> };
  const [root] = rows[0]['QUERY PLAN'];
  const indexes: string[] = [];
  const types: string[] = [];
  collect(root.Plan, indexes, types);
  return {
    intended,
    intendedUsed: indexes.includes(intended),
    indexes,
    seqScan: types.includes('Seq Scan'),
    executionMs: Math.round(root['Execution Time'] * 100) / 100,
    planningMs: Math.round(root['Planning Time'] * 100) / 100,
  };
}
