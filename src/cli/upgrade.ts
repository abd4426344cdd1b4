/**
 * `executions upgrade` and `executions bulk-upgrade`: move pending and waiting executions (and running
 * ones whose worker is gone) to another version of their task's code (PRODUCT.md §9), for the workers serving it to replay their histories.
 * A version is named with --to; the task defined without one with --to-unversioned, since any word
 * (`none`, `unversioned`) is also a valid version name.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { BulkUpgradeRequest, StepwiseClient } from '../client';
import { TASK_VERSION } from '../domain/version';
import { versionLabel } from '../domain/version-text';
import { collect, parseCount, parseInstantOption } from './arguments';
import { confirm, DEFAULT_LIMIT, MAX_LIMIT, oneOf } from './bulk';
import { print, printJson, withClient, withConnectionOptions, type ConnectionFlags } from './command-runner';
import { EXIT, OutcomeError, UsageError } from './failures';
import { sanitize, truncate } from './format';
import { renderBulkResult, renderUpgraded } from './render';

/** The statuses an upgrade applies to: no live handler holds the execution (a running one moves only once its worker is gone). */
const UPGRADABLE = ['pending', 'waiting', 'running'] as const satisfies readonly NonNullable<BulkUpgradeRequest['status']>[];

/** A version as the contract takes it, checked before anything is sent. */
function parseVersion(value: string): string {
  if (!TASK_VERSION.test(value)) throw new InvalidArgumentError('must be 1-64 letters, digits or ._:+- characters, starting with a letter or digit');
  return value;
}

/** The version --NAME or --NAME-unversioned gives: a string, null for the unversioned task, undefined for neither. */
function versionOf(flags: { version?: string; unversioned?: boolean }, name: string): string | null | undefined {
  if (flags.version !== undefined && flags.unversioned) throw new UsageError(`give either --${name} or --${name}-unversioned, not both`);
  if (flags.unversioned) return null;
  return flags.version;
}

/** The target version, which both commands require. */
function targetOf(flags: { to?: string; toUnversioned?: boolean }): string | null {
  const to = versionOf({ version: flags.to, unversioned: flags.toUnversioned }, 'to');
  if (to === undefined) throw new UsageError('say which version to move to: --to <version>, or --to-unversioned for the task defined without one');
  return to;
}

const TO_HELP = `
--to names a version as the task's definition gives it (defineTask({ version })); --to-unversioned
moves to the task defined without a version. The target must be served by a live worker (else 409
task_version_not_served). Only do this when that version's code replays the execution's history:
it calls the same durable operations in the same order up to where the execution is, or guards its
changes with ctx.patched(). If not, the execution fails with a NonDeterminismError.`;

function addUpgradeCommand(executions: Command): void {
  withConnectionOptions(
    executions
      .command('upgrade')
      .description("move a pending or waiting execution (or a running one whose worker is gone) to another version of its task's code")
      .argument('<id>', 'the execution id'),
  )
    .option('--to <version>', 'the version to move it to', parseVersion)
    .option('--to-unversioned', 'move it to the task defined without a version')
    .addHelpText('after', TO_HELP)
    .action(async (id: string, flags: ConnectionFlags & { to?: string; toUnversioned?: boolean }) =>
      withClient(flags, async (client) => {
        const upgraded = await client.upgrade(id, targetOf(flags));
        if (flags.json) printJson(upgraded);
        else print(renderUpgraded(upgraded));
      }),
    );
}

interface BulkUpgradeFlags extends ConnectionFlags {
  task: string;
  to?: string;
  toUnversioned?: boolean;
  from?: string;
  fromUnversioned?: boolean;
  status?: UpgradableStatus;
  tag?: string[];
  createdAfter?: string;
  createdBefore?: string;
  limit?: number;
  yes?: boolean;
}

function requestOf(flags: BulkUpgradeFlags): BulkUpgradeRequest {
  const request: BulkUpgradeRequest = { task: flags.task, version: targetOf(flags) };
  const from = versionOf({ version: flags.from, unversioned: flags.fromUnversioned }, 'from');
  if (from !== undefined) request.task_version = from;
  if (flags.status !== undefined) request.status = flags.status;
  if (flags.tag !== undefined) request.tag = flags.tag;
  if (flags.createdAfter !== undefined) request.created_after = flags.createdAfter;
  if (flags.createdBefore !== undefined) request.created_before = flags.createdBefore;
  if (flags.limit !== undefined) request.limit = flags.limit;
  return request;
}

type UpgradableStatus = (typeof UPGRADABLE)[number];
const statusesOf = (r: BulkUpgradeRequest): readonly UpgradableStatus[] => (r.status === undefined ? UPGRADABLE : [r.status]);

/**
 * How many executions the request matches now, for the question only. Without --from the list counts
 * them exactly (it filters alike); the list has no version filter, so with --from the task's version
 * counts give it, an upper bound when tags or creation times narrow it further.
 */
async function countMatches(client: StepwiseClient, r: BulkUpgradeRequest): Promise<{ count: number; atMost: boolean }> {
  const { task, tag, created_after, created_before } = r;
  if (r.task_version === undefined) {
    const pages = await Promise.all(statusesOf(r).map((status) => client.list({ status, task, tag, created_after, created_before, limit: 1 })));
    return { count: pages.reduce((sum, page) => sum + page.total, 0), atMost: false };
  }
  const version = (await client.listTasks()).find((t) => t.name === task)?.versions.find((v) => v.version === r.task_version);
  const count = version === undefined ? 0 : statusesOf(r).reduce((sum, status) => sum + version[status], 0);
  return { count, atMost: [tag, created_after, created_before].some((f) => f !== undefined) && count > 0 };
}

/** `Up to 3 pending, waiting or running executions of task sync on version 1 match (tag eu). Upgrade them to version 2? [y/N] `. */
function question(r: BulkUpgradeRequest, { count, atMost }: { count: number; atMost: boolean }): string {
  const scope = [
    r.tag !== undefined && `tag${r.tag.length > 1 ? 's' : ''} ${r.tag.join(', ')}`,
    r.created_after !== undefined && `created at or after ${r.created_after}`,
    r.created_before !== undefined && `created before ${r.created_before}`,
  ].filter((part): part is string => typeof part === 'string');
  const on = r.task_version === undefined ? '' : ` on ${versionLabel(r.task_version)}`;
  const limit = r.limit ?? DEFAULT_LIMIT;
  const which = count > limit ? `the oldest ${limit} of them (--limit)` : count === 1 ? 'it' : 'them';
  const what = `${count} ${oneOf(statusesOf(r))} execution${count === 1 ? '' : 's'} of task ${truncate(sanitize(r.task), 60)}${on}`;
  const matches = `match${count === 1 && !atMost ? 'es' : ''}${scope.length > 0 ? ` (${truncate(sanitize(scope.join('; ')), 200)})` : ''}`;
  return `${atMost ? 'Up to ' : ''}${what} ${matches}. Upgrade ${which} to ${versionLabel(r.version)}? [y/N] `;
}

const BULK_HELP = `${TO_HELP}

--from takes only the executions pinned to one version (--from-unversioned: to the task defined
without one); without it, any version's, and pending executions that never started are pinned to the
target too. A running execution moves only once its worker is gone (its lease expired): one a live
worker holds counts as matched but not changed. The oldest matching executions are taken first, at
most --limit (default ${DEFAULT_LIMIT}); each is changed on its own. Prints "matched N, changed M".

On a terminal it counts what matches and asks before it acts; --yes does not ask. When stdin is not
a terminal there is no one to ask, and --yes is required.`;

function addBulkUpgradeCommand(executions: Command): void {
  withConnectionOptions(executions.command('bulk-upgrade').description("move the executions of a task a filter matches (pending, waiting, running on a gone worker) to another version of its code"))
    .requiredOption('--task <name>', 'the task whose executions move')
    .option('--to <version>', 'the version to move them to', parseVersion)
    .option('--to-unversioned', 'move them to the task defined without a version')
    .option('--from <version>', 'only executions pinned to this version', parseVersion)
    .option('--from-unversioned', 'only executions pinned to the task defined without a version')
    .addOption(new Option('--status <status>', 'only executions in this status (default: any of these; running ones move only once their worker is gone)').choices(UPGRADABLE))
    .option('--tag <tag>', 'only executions with this tag; repeat it for executions with every tag given', collect)
    .option('--created-after <instant>', 'only executions created at or after this ISO 8601 instant, such as 2024-10-30T00:00:00Z', parseInstantOption)
    .option('--created-before <instant>', 'only executions created before this ISO 8601 instant', parseInstantOption)
    .option('--limit <n>', `the most executions to take, oldest first, up to ${MAX_LIMIT} (default ${DEFAULT_LIMIT})`, parseCount(1, MAX_LIMIT))
    .option('-y, --yes', 'do not ask for confirmation (required when stdin is not a terminal)')
    .addHelpText('after', BULK_HELP)
    .action(async (flags: BulkUpgradeFlags) =>
      withClient(flags, async (client) => {
        const request = requestOf(flags);
        if (!flags.yes && !process.stdin.isTTY) throw new UsageError('bulk-upgrade asks before it acts, but stdin is not a terminal: add --yes to upgrade without asking');
        if (!flags.yes && !(await confirm(question(request, await countMatches(client, request))))) {
          throw new OutcomeError('not confirmed: nothing was upgraded', EXIT.declined);
        }
        const result = await client.bulkUpgrade(request);
        if (flags.json) printJson(result);
        else print(renderBulkResult(result, flags.limit ?? DEFAULT_LIMIT));
      }),
    );
}

/** Adds `upgrade` and `bulk-upgrade` to the `executions` command group. */
export function addUpgradeCommands(executions: Command): void {
  addUpgradeCommand(executions);
  addBulkUpgradeCommand(executions);
}
