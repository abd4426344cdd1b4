/**
 * `executions bulk-cancel` and `executions bulk-retry`: one filter, many executions. Two rails stand
 * between a slip of the keyboard and every execution on the server: a filter is required (or --all,
 * said on purpose), and the action is confirmed, on a terminal by answering y, elsewhere by --yes.
 */
import readline from 'node:readline';
import { Option, type Command } from 'commander';
import type { BulkFilter, BulkResult, ExecutionStatus, StepwiseClient } from '../client';
import { canTransition, EXECUTION_STATUSES, isCancellable, isTerminal } from '../domain/status';
import { collect, parseCount, parseInstantOption } from './arguments';
import { print, printJson, withClient, withConnectionOptions, type ConnectionFlags } from './command-runner';
import { EXIT, OutcomeError, UsageError } from './failures';
import { sanitize, truncate } from './format';
import { renderBulkResult } from './render';

/** BulkFilter's `limit` in openapi.yaml: its default, which the server applies, and its maximum. */
export const DEFAULT_LIMIT = 1000;
export const MAX_LIMIT = 10_000;

interface BulkFlags extends ConnectionFlags {
  task?: string;
  status?: ExecutionStatus;
  tag?: string[];
  createdAfter?: string;
  createdBefore?: string;
  limit?: number;
  all?: boolean;
  yes?: boolean;
}

interface BulkAction {
  name: 'bulk-cancel' | 'bulk-retry';
  verb: 'cancel' | 'retry';
  done: 'cancelled' | 'retried';
  description: string;
  /** The statuses the action applies to, which the server takes when --status is absent. */
  statuses: readonly ExecutionStatus[];
  run(client: StepwiseClient, filter: BulkFilter): Promise<BulkResult>;
}

const ACTIONS: readonly BulkAction[] = [
  {
    name: 'bulk-cancel',
    verb: 'cancel',
    done: 'cancelled',
    description: 'cancel the pending, running and waiting executions a filter matches (their unfinished children with them)',
    statuses: EXECUTION_STATUSES.filter(isCancellable),
    run: (client, filter) => client.bulkCancel(filter),
  },
  {
    name: 'bulk-retry',
    verb: 'retry',
    done: 'retried',
    description: 'retry the failed and cancelled executions a filter matches, each from where it stopped',
    // The finished statuses that may go back to pending are the ones a retry takes.
    statuses: EXECUTION_STATUSES.filter((s) => isTerminal(s) && canTransition(s, 'pending')),
    run: (client, filter) => client.bulkRetry(filter),
  },
];

const FILTER_FLAGS = '--task, --status, --tag, --created-after or --created-before';

/** `pending, running or waiting`. */
export function oneOf(words: readonly string[]): string {
  return words.length > 1 ? `${words.slice(0, -1).join(', ')} or ${words.at(-1)}` : words.join('');
}

function bulkHelp(action: BulkAction): string {
  return `
A filter is required: ${FILTER_FLAGS} (they combine),
or --all to ${action.verb} every ${oneOf(action.statuses)} execution. The oldest matching executions
are taken first, at most --limit (default ${DEFAULT_LIMIT}) in one run; each is changed on its own, so
one that moved on meanwhile counts as matched but not changed. Prints "matched N, changed M".

On a terminal it counts what matches and asks before it acts; --yes does not ask. When stdin is not
a terminal (scripts, CI, pipes) there is no one to ask, and --yes is required.
Exits 2 without a filter, or without --yes where it cannot ask; 1 when the answer is not yes.`;
}

function hasFilter(flags: BulkFlags): boolean {
  return [flags.task, flags.status, flags.tag, flags.createdAfter, flags.createdBefore].some((value) => value !== undefined);
}

/** Throws the usage error that stops the action before anything is read or sent, if one does. */
function checkRails(action: BulkAction, flags: BulkFlags): void {
  if (!hasFilter(flags) && !flags.all) {
    throw new UsageError(`${action.name} needs a filter (${FILTER_FLAGS}), or --all to ${action.verb} every ${oneOf(action.statuses)} execution`);
  }
  if (hasFilter(flags) && flags.all) throw new UsageError('--all means no filter: give either --all or filters, not both');
  if (!flags.yes && !process.stdin.isTTY) {
    throw new UsageError(`${action.name} asks before it acts, but stdin is not a terminal: add --yes to ${action.verb} without asking`);
  }
}

function filterOf(flags: BulkFlags): BulkFilter {
  const filter: BulkFilter = {};
  if (flags.task !== undefined) filter.task = flags.task;
  if (flags.status !== undefined) filter.status = flags.status;
  if (flags.tag !== undefined) filter.tag = flags.tag;
  if (flags.createdAfter !== undefined) filter.created_after = flags.createdAfter;
  if (flags.createdBefore !== undefined) filter.created_before = flags.createdBefore;
  if (flags.limit !== undefined) filter.limit = flags.limit;
  return filter;
}

/** The statuses the filter leaves of the action's: --status narrows them, perhaps to none. */
function statusesOf(action: BulkAction, filter: BulkFilter): readonly ExecutionStatus[] {
  return filter.status === undefined ? action.statuses : action.statuses.filter((s) => s === filter.status);
}

/**
 * How many executions the filter matches now, counted through the list (which filters alike), one
 * status at a time. A preview for the question only: the action itself finds its own matches.
 */
async function countMatches(client: StepwiseClient, action: BulkAction, filter: BulkFilter): Promise<number> {
  const { task, tag, created_after, created_before } = filter;
  const pages = await Promise.all(statusesOf(action, filter).map((status) => client.list({ status, task, tag, created_after, created_before, limit: 1 })));
  return pages.reduce((sum, page) => sum + page.total, 0);
}

/** The question, such as `3 failed or cancelled executions match (task sync; tag eu). Retry them? [y/N] `. */
function question(action: BulkAction, filter: BulkFilter, matching: number): string {
  const parts = [
    filter.task !== undefined && `task ${filter.task}`,
    filter.tag !== undefined && `tag${filter.tag.length > 1 ? 's' : ''} ${filter.tag.join(', ')}`,
    filter.created_after !== undefined && `created at or after ${filter.created_after}`,
    filter.created_before !== undefined && `created before ${filter.created_before}`,
  ].filter((part): part is string => typeof part === 'string');
  // --status alone shows in the statuses named; no filter at all is --all.
  const scope = parts.length > 0 ? ` (${truncate(sanitize(parts.join('; ')), 200)})` : filter.status === undefined ? ' (no filter: --all)' : '';
  const limit = filter.limit ?? DEFAULT_LIMIT;
  const which = matching > limit ? `the oldest ${limit} of them (--limit)` : matching === 1 ? 'it' : 'them';
  const verb = action.verb[0].toUpperCase() + action.verb.slice(1);
  const kinds = oneOf(statusesOf(action, filter));
  return `${matching} ${kinds} execution${matching === 1 ? '' : 's'} match${matching === 1 ? 'es' : ''}${scope}. ${verb} ${which}? [y/N] `;
}

/** Asks on stderr and reads one line of stdin: true for y or yes; false for anything else or none. */
export function confirm(prompt: string): Promise<boolean> {
  // terminal: false leaves echo and line editing to the terminal's own line discipline.
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr, terminal: false });
  return new Promise((resolve) => {
    let answer: string | undefined;
    rl.once('line', (line) => {
      answer = line;
      rl.close();
    });
    rl.once('close', () => {
      if (answer === undefined) process.stderr.write('\n');
      resolve(answer !== undefined && /^y(es)?$/i.test(answer.trim()));
    });
    process.stderr.write(prompt);
  });
}

function addBulkCommand(executions: Command, action: BulkAction): void {
  withConnectionOptions(executions.command(action.name).description(action.description))
    .option('--task <name>', 'only executions of this task')
    .addOption(new Option('--status <status>', 'only executions in this status (default: any of these)').choices(action.statuses))
    .option('--tag <tag>', 'only executions with this tag; repeat it for executions with every tag given', collect)
    .option('--created-after <instant>', 'only executions created at or after this ISO 8601 instant, such as 2024-10-30T00:00:00Z', parseInstantOption)
    .option('--created-before <instant>', 'only executions created before this ISO 8601 instant', parseInstantOption)
    .option('--limit <n>', `the most executions to take, oldest first, up to ${MAX_LIMIT} (default ${DEFAULT_LIMIT})`, parseCount(1, MAX_LIMIT))
    .option('--all', `no filter: every ${oneOf(action.statuses)} execution, up to --limit`)
    .option('-y, --yes', 'do not ask for confirmation (required when stdin is not a terminal)')
    .addHelpText('after', bulkHelp(action))
    .action(async (flags: BulkFlags) =>
      withClient(flags, async (client) => {
        checkRails(action, flags);
        const filter = filterOf(flags);
        if (!flags.yes && !(await confirm(question(action, filter, await countMatches(client, action, filter))))) {
          throw new OutcomeError(`not confirmed: nothing was ${action.done}`, EXIT.declined);
        }
        const result = await action.run(client, filter);
        if (flags.json) printJson(result);
        else print(renderBulkResult(result, flags.limit ?? DEFAULT_LIMIT));
      }),
    );
}

/** Adds `bulk-cancel` and `bulk-retry` to the `executions` command group. */
export function addBulkCommands(executions: Command): void {
  for (const action of ACTIONS) addBulkCommand(executions, action);
}
