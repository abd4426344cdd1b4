import pg from 'pg';
import type { ClientBase } from 'pg';
import { inlineParameters } from '../inline-parameters';
import { COMPLETE_CTES, completionParams, type Completion } from './complete';

/** A prepared claim; `keyed` ones take the cursor as $4 and the room to run at once as $5. */
export interface ThrottledStatement {
  name: string;
  text: string;
  keyed: boolean;
}

/** The completion statement run inside a throttled claim's query: prepared with SQL PREPARE, or inline (see inlineClaim). */
const COMPLETE_NAME = 'stepwise_complete_in_claim';
const COMPLETE_TEXT = `WITH ${COMPLETE_CTES}
     SELECT id, (SELECT count(*) FROM notified) AS _n FROM done`;
const COMPLETE_PREPARE = `PREPARE ${COMPLETE_NAME}(uuid[], uuid[], json[], uuid[]) AS ${COMPLETE_TEXT}`;

/** The parameter types of a claim statement (see throttledStatement); unkeyed ones take the first three. */
const CLAIM_TYPES = ['int', 'float8', 'uuid', 'text', 'int'];

/** An array parameter written as a literal (the simple protocol takes no parameters). */
const arrayLiteral = (values: readonly (string | null)[], type: string) =>
  values.length === 0 ? `'{}'::${type}[]` : `ARRAY[${values.map((v) => (v === null ? 'NULL' : pg.escapeLiteral(v))).join(', ')}]::${type}[]`;

/** The parameters of the completion statement for `items`, as typed literals. */
function completeArgs(items: readonly Completion[]): string[] {
  const [ids, tokens, outputs, parents] = completionParams(items);
  return [arrayLiteral(ids, 'uuid'), arrayLiteral(tokens, 'uuid'), arrayLiteral(outputs, 'json'), arrayLiteral(parents, 'uuid')];
}

/**
 * The one simple query of a throttled claim (see claimThrottledExecutions): `build` writes its
 * statements for the connection it runs on, `onFailure` learns what a failed one left there. `args`
 * are the claim statement's parameters as SQL literals. `pooled`: behind a transaction pooler, where
 * nothing is prepared (see inlineClaim).
 */
export function throttledClaimQuery(pooled: boolean, task: string, statement: ThrottledStatement, args: string[], completions: readonly Completion[]) {
  if (pooled) return { build: () => inlineClaim(task, statement, args, completions), onFailure: undefined };
  return {
    build: (connection: ClientBase) => preparedClaim(connection, task, statement, args, completions),
    // PREPARE is not undone by a rollback: after a failure, learn which ran, so that the next claim on
    // that connection neither repeats nor skips one.
    onFailure: (connection: ClientBase) => forgetUnprepared(connection, statement.name),
  };
}

/**
 * A throttled claim's transaction, in one simple query: `complete` (optional) records completions
 * first, so that the claim, a later statement, sees the places they free; then the task's lock; then
 * `claim`. Returns the statements and the indexes of those whose rows count.
 */
function claimTransaction(prefix: string[], task: string, complete: string | undefined, claim: string, generic: boolean): { statements: string[]; indexes: number[] } {
  const statements = [
    ...prefix,
    'BEGIN ISOLATION LEVEL READ COMMITTED',
    ...(generic ? ['SET LOCAL plan_cache_mode = force_generic_plan'] : []),
    ...(complete === undefined ? [] : [complete]),
    `SELECT set_config('stepwise.claim_locked', pg_try_advisory_xact_lock(hashtextextended('stepwise.limit:' || ${pg.escapeLiteral(task)}, 0))::text, true)`,
    claim,
    'COMMIT',
  ];
  const claimAt = statements.length - 2;
  return { statements, indexes: complete === undefined ? [claimAt] : [claimAt - 2, claimAt] };
}

/**
 * The claim as EXECUTEs of statements prepared on `connection` (PREPAREd first where it has not yet).
 * Their generic plan serves every room and cursor: planning it for each claim cost more than running it.
 */
function preparedClaim(connection: ClientBase, task: string, statement: ThrottledStatement, args: string[], completions: readonly Completion[]) {
  const prepared = preparedOn(connection);
  const prepare = [
    ...(prepared.has(statement.name) ? [] : [`PREPARE ${statement.name}(${CLAIM_TYPES.slice(0, args.length).join(', ')}) AS ${statement.text}`]),
    ...(completions.length === 0 || prepared.has(COMPLETE_NAME) ? [] : [COMPLETE_PREPARE]),
  ];
  // Counted as prepared from here: a failure before a PREPARE ran is corrected by forgetUnprepared.
  prepared.add(statement.name);
  if (completions.length > 0) prepared.add(COMPLETE_NAME);
  const complete = completions.length > 0 ? `EXECUTE ${COMPLETE_NAME}(${completeArgs(completions).join(', ')})` : undefined;
  return claimTransaction(prepare, task, complete, `EXECUTE ${statement.name}(${args.join(', ')})`, true);
}

/**
 * The claim with its statements' texts inline, nothing prepared: behind a transaction pooler a
 * PREPARE may not be on the server connection of the next claim, or be there already. Each claim is
 * planned anew.
 */
function inlineClaim(task: string, statement: ThrottledStatement, args: string[], completions: readonly Completion[]) {
  const complete = completions.length > 0 ? inlineParameters(COMPLETE_TEXT, completeArgs(completions)) : undefined;
  return claimTransaction([], task, complete, inlineParameters(statement.text, args.map((a, i) => `${a}::${CLAIM_TYPES[i]}`)), false);
}

/** Drops from a connection's list the statements a failed claim did not get to PREPARE. */
async function forgetUnprepared(connection: ClientBase, claimName: string): Promise<void> {
  const found = await connection.query<{ name: string }>('SELECT name FROM pg_prepared_statements WHERE name = ANY($1)', [[claimName, COMPLETE_NAME]]);
  const names = new Set(found.rows.map((r) => r.name));
  for (const name of [claimName, COMPLETE_NAME]) if (!names.has(name)) preparedOn(connection).delete(name);
}

/** The claim statements each connection has prepared (PREPARE, in SQL: they run inside one simple query). */
const preparedByConnection = new WeakMap<object, Set<string>>();

function preparedOn(connection: object): Set<string> {
  let names = preparedByConnection.get(connection);
  if (!names) preparedByConnection.set(connection, (names = new Set()));
  return names;
}

